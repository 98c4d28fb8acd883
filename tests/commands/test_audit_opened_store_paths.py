"""Done-when checks of the dlopen-aware audit on real store paths built by Nix:
a cuBLAS-like library that opens libcuda.so.1 itself, with and without
autoAddOpenGLRunpathHook; a library opening NVRTC that its closure lacks;
an optional name."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, run_cli, validate
from hookfile import runpath_hook  # noqa: F401 (a fixture)
from nixstore import needs_nix, nix_build

pytestmark = needs_nix



def opener_c(*names: str) -> str:
    """C source of a library that dlopens `names`, as the CUDA runtime does."""
    listed = ", ".join(f'\\"{n}\\"' for n in names)
    return (f'#include <dlfcn.h>\nstatic const char *n[] = {{ {listed} }};\n'
            'int open_all(void) { int k = 0; for (unsigned i = 0; i < sizeof n / sizeof *n; i++) '
            'k += dlopen(n[i], RTLD_NOW) != 0; return k; }\n')


BODY = rf"""
let
  # nixstore.clib with SONAME as the file name and the SONAME.
  lib = name: soname: source: flags: clib name soname source "-Wl,-soname,${{soname}} ${{flags}}";
in rec {{
  nvrtc = lib "fixture-cuda-nvrtc-13.0" "libnvrtc.so.13" "int nvrtc(void) {{ return 13; }}" "";
  cublas = lib "fixture-libcublas-13.1" "libcublas.so.13" "{opener_c("libcuda.so.1", "libcuda.so")}" "";
  cublasHooked = builtins.derivation {{
    name = "fixture-libcublas-hooked-13.1"; inherit system; builder = "/bin/bash";
    PATH = "/usr/local/bin:/usr/bin:/bin"; hook = "@HOOK@";
    args = [ "-euo" "pipefail" "-c" ''
      mkdir -p $out/lib
      printf '%s' "{opener_c("libcuda.so.1", "libcuda.so")}" > c.c
      gcc -shared -fPIC -o $out/lib/libcublas.so.13 c.c -Wl,-soname,libcublas.so.13
      source $hook
      autoAddOpenGLRunpath
    '' ];
  }};
  cublasLt = lib "fixture-libcublasLt-13.1" "libcublasLt.so.13" "{opener_c("libnvrtc.so.13")}" "";
  cublasLtWithNvrtc = lib "fixture-libcublasLt-nvrtc-13.1" "libcublasLt.so.13" "{opener_c("libnvrtc.so.13")}"
    "-Wl,--enable-new-dtags,-rpath,${{nvrtc}}/lib";
  nccl = lib "fixture-nccl-2.30" "libnccl.so.2" "{opener_c("libibverbs.so.1", "libgdrapi.so.2", "libmlx5.so.1")}" "";
}}
"""


def audit_json(path: str):
    p = run_cli("audit", "--json", path)
    data = json.loads(p.stdout)
    validate(data)
    return p.returncode, data


def test_cublas_opening_the_driver_needs_the_driver_directory(tmp_path, runpath_hook):
    (bare,) = nix_build(tmp_path, BODY + ".cublas")
    rc, data = audit_json(bare)
    assert rc == 1 and data["mode"] == "nix-store"
    (f,) = [f for f in data["findings"] if f["rule"] == "missing-driver-runpath"]
    lib = Path(bare) / "lib/libcublas.so.13"
    assert f["file"] == str(lib) and f["needed"] == "libcuda.so.1" and f["string"] == "libcuda.so.1"
    assert lib.read_bytes()[f["offset"]:].startswith(b"libcuda.so.1\0")
    assert f"offset {f['offset']:#x}" in f["message"]
    text = run_cli("audit", bare)
    assert text.returncode == 1 and "missing-driver-runpath" in text.stdout and "libcuda.so.1" in text.stdout

    (hooked,) = nix_build(tmp_path, BODY.replace('"@HOOK@"', str(runpath_hook)) + ".cublasHooked")
    rc, data = audit_json(hooked)
    assert rc == 0, data["findings"]
    assert [(o["name"], o["class"], o["how"]) for o in data["opened"]] == [("libcuda.so.1", "driver", "driver")]


def test_nvrtc_outside_the_closure_fails_with_the_new_rule(tmp_path):
    (lt,) = nix_build(tmp_path, BODY + ".cublasLt")
    rc, data = audit_json(lt)
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "unresolved-dlopen-library" and f["needed"] == "libnvrtc.so.13"
    assert f["file"] == f"{lt}/lib/libcublasLt.so.13" and f["class"] == "toolkit"
    assert Path(f["file"]).read_bytes()[f["offset"]:].startswith(b"libnvrtc.so.13\0")
    # Where it looked: the interpreter's directory at most; never the host.
    assert not any(d.startswith(("/usr", "/lib")) for d in f["searched"])

    (good,) = nix_build(tmp_path, BODY + ".cublasLtWithNvrtc")
    rc, data = audit_json(good)
    assert rc == 0, data["findings"]
    (row,) = data["opened"]
    assert row["name"] == "libnvrtc.so.13" and row["how"] == "runpath" and row["inside"]
    assert row["path"].endswith("-fixture-cuda-nvrtc-13.0/lib/libnvrtc.so.13")


def test_an_optional_name_never_fails(tmp_path):
    (nccl,) = nix_build(tmp_path, BODY + ".nccl")
    rc, data = audit_json(nccl)
    assert rc == 0
    assert {f["rule"] for f in data["findings"]} == {"optional-dlopen-library"}
    assert {f["severity"] for f in data["findings"]} == {"info"}
    assert {o["name"] for o in data["opened"]} == {"libibverbs.so.1", "libgdrapi.so.2", "libmlx5.so.1"}
