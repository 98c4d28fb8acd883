"""Opt-in: a PyTorch closure made of the real PyTorch 2.14.1 and NVIDIA CUDA 13
libraries, wired the way the overlay wires them, through closure-audit's gate.

The redistributables are NVIDIA's wheels re-laid as their redist tarballs and
split by the split hook; each library's runpath names the lib outputs it needs
(as autoPatchelf leaves it) and the driver (the driver hook); PyTorch's
libraries get the same, plus the libraries it dlopens (extraRunpaths). The
gate passes on that closure, and fails with the right chains once a magma path
and a toolkit RUNPATH entry are added.

Needs NIXCUDA_WHEELS (a tree holding torch 2.14.1, as pip installs it) and
NIXCUDA_WHEELHOUSE (NVIDIA's wheels that torch 2.14.1 depends on), and Nix.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import pytest

import hookfile
import redist_fixture
from conftest import ROOT, run_cli, validate
from nixstore import needs_nix, nix_build
from redist_features.inspect import inspect

TREE, HOUSE = os.environ.get("NIXCUDA_WHEELS"), os.environ.get("NIXCUDA_WHEELHOUSE")
pytestmark = [pytest.mark.wheels, needs_nix,
              pytest.mark.skipif(not (TREE and HOUSE), reason="set NIXCUDA_WHEELS and NIXCUDA_WHEELHOUSE")]

PACKAGES = ["cuda_cudart", "libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse", "libnvjitlink",
            "cuda_nvrtc", "cuda_cupti", "cuda_nvtx", "libcufile", "cudnn", "nccl", "libcusparse_lt", "libnvshmem"]
# What PyTorch loads with dlopen, as pkgs/torch/default.nix lists it.
DLOPENED = ["cuda_nvrtc", "libnvjitlink", "cudnn", "libcublas", "libcufft", "libcurand", "libcusolver",
            "libcusparse", "libcufile", "cuda_cupti", "cuda_nvtx"]

EXPR = r"""
let
  driverHook = @DRIVER_HOOK@;
  splitHook = @SPLIT_HOOK@;
  # libstdc++ and libgcc_s, as the compiler's lib output provides them in nixpkgs.
  gccLib = sh "gcc-14-lib" ''
    mkdir -p $out/lib
    cp -L $(gcc -print-file-name=libstdc++.so.6) $(gcc -print-file-name=libgcc_s.so.1) $out/lib/
  '';
  # glibc, which nixpkgs' linker wrapper and autoPatchelf put in every runpath.
  glibc = sh "glibc-2.40" ''
    mkdir -p $out/lib
    for l in libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 libutil.so.1 ld-linux-x86-64.so.2; do
      cp -L $(gcc -print-file-name=$l) $out/lib/
    done
  '';
  fixups = import @FIXUPS@ { lib = import @STUB_LIB@; cudaPackages = { cudaMajorMinorVersion = "13.0"; }; };
  # NCCL is not in NVIDIA's CUDA manifests (nixpkgs builds it from source), so
  # the fixups do not know it; its binary release compiles in /usr paths.
  allowFHS = name: ((fixups.${name} or (_: { })) { buildInputs = [ ]; }).allowFHSReferences or (name == "nccl");
  redist = { name, version, src, outputs }: builtins.derivation {
    name = "cuda13.0-${name}-${version}"; inherit system src;
    outputs = [ "out" ] ++ outputs; builder = "/bin/bash"; splitRedistStrict = "1";
    allowFHSReferences = if allowFHS name then "1" else "";
    PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-euo" "pipefail" "-c" ''
      mkdir -p $out && tar -xJf $src -C $out --strip-components=1
      source ${splitHook}; splitRedistOutputs
      # As nixpkgs' redist builder does: every output's libraries find the
      # driver, which cuBLAS, nvJitLink and the rest open at run time.
      source ${driverHook}; autoAddOpenGLRunpath
    '' ];
  };
  split = { @SPLIT@ };
  libDirs = map (p: "${p.lib}/lib") (builtins.attrValues split) ++ [ "${gccLib}/lib" "${glibc}/lib" ];
  # As autoPatchelf leaves them: each library's runpath keeps the directories
  # that provide one of its needs, then $ORIGIN; the driver hook adds the driver.
  wired = name: p: builtins.derivation {
    name = "${p.name}-lib"; inherit system; builder = "/bin/bash";
    PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-euo" "pipefail" "-c" ''
      cp -r --no-preserve=mode ${p.lib} $out
      for f in $(find $out -name '*.so*' -type f); do
        patchelf --set-rpath "${builtins.concatStringsSep ":" libDirs}" "$f"
        patchelf --shrink-rpath "$f"
        patchelf --add-rpath '$ORIGIN' "$f"
      done
      outputs=out; source ${driverHook}; autoAddOpenGLRunpath
    '' ];
  };
  libs = builtins.mapAttrs wired split;
  torchWith = { name, extra }: builtins.derivation {
    inherit name system; builder = "/bin/bash"; PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-euo" "pipefail" "-c" ''
      site=$out/lib/python3.11/site-packages
      mkdir -p $site
      cp -r --no-preserve=mode @TORCH@ $site/torch
      all="${builtins.concatStringsSep ":" (map (p: "${p}/lib") (builtins.attrValues libs) ++ [ "${gccLib}/lib" "${glibc}/lib" ])}"
      for f in $(find $site/torch -type f); do
        head -c 4 "$f" | grep -q ELF || continue
        patchelf --set-rpath "$all" "$f"
        patchelf --shrink-rpath "$f"
        patchelf --add-rpath '$ORIGIN:$ORIGIN/lib:@DLOPENED@' "$f"
        # Executables (torch/bin) run under the closure's glibc, as autoPatchelf
        # sets them, and find PyTorch's libraries as its build links them.
        if patchelf --print-interpreter "$f" >/dev/null 2>&1; then
          patchelf --set-interpreter ${glibc}/lib/ld-linux-x86-64.so.2 "$f"
          patchelf --add-rpath '$ORIGIN/../lib' "$f"
        fi
      done
      ${extra}
      outputs=out; source ${driverHook}; autoAddOpenGLRunpath
    '' ];
  };
  magma = sh "magma-2.9.0" "mkdir -p $out/lib; echo 'int magma_init(void) { return 0; }' > m.c; gcc -shared -fPIC -o $out/lib/libmagma.so m.c";
  cudatoolkit = sh "cudatoolkit-13.0.2" "mkdir -p $out/lib; echo toolkit > $out/version.txt";
  torch = torchWith { name = "python3.11-torch-2.14.1"; extra = ""; };
  torchBad = torchWith {
    name = "python3.11-torch-2.14.1-bad";
    extra = ''
      mkdir -p $site/torch/share/cmake/Caffe2
      printf 'set(MAGMA_ROOT "%s")\n' ${magma} > $site/torch/share/cmake/Caffe2/Caffe2Targets.cmake
      patchelf --add-rpath ${cudatoolkit}/lib $site/torch/lib/libtorch_cuda.so
    '';
  };
in [ torch torchBad magma cudatoolkit ]
"""


@pytest.fixture(scope="module")
def closures(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torch-closure")
    wheels = {}
    for w in sorted(glob.glob(os.path.join(HOUSE, "nvidia_*.whl"))):
        from redist_features.archive import identify

        wheels.setdefault(identify(w).package, w)
    missing = [p for p in PACKAGES if p not in wheels]
    assert not missing, f"NIXCUDA_WHEELHOUSE lacks wheels of {missing}"
    entries = []
    for name in PACKAGES:
        archive = redist_fixture.wheel_to_redist(Path(wheels[name]), tmp)
        r = inspect(str(archive))
        outputs = " ".join(f'"{o}"' for o in r.outputs)
        entries.append(f'{name} = redist {{ name = "{name}"; version = "{r.source.version}"; src = {archive}; '
                       f'outputs = [ {outputs} ]; }};')
    (torch_dir,) = {os.path.realpath(p) for p in glob.glob(os.path.join(TREE, "**", "torch", "__init__.py"),
                                                        recursive=True)}
    dlopened = ":".join(f"${{libs.{n}}}/lib" for n in DLOPENED)
    expr = (EXPR.replace("@SPLIT@", " ".join(entries)).replace("@TORCH@", os.path.dirname(torch_dir))
            .replace("@DRIVER_HOOK@", str(ROOT / "hooks/auto-add-opengl-runpath-hook.sh"))
            .replace("@SPLIT_HOOK@", str(hookfile.split_substituted(tmp))).replace("@DLOPENED@", dlopened)
            .replace("@FIXUPS@", str(ROOT / "pkgs/cuda/fixups.nix"))
            .replace("@STUB_LIB@", str(ROOT / "tests/contract/nixpkgs-contract-stub/lib.nix")))
    torch, bad, magma, toolkit = nix_build(tmp, expr)
    return {"torch": torch, "bad": bad, "magma": magma, "toolkit": toolkit}


def gate(target: str, tmp_path: Path):
    md = tmp_path / "summary.md"
    p = run_cli("gate", "--budgets", str(ROOT / "ci/closure-budgets.toml"), "--target", f"torch={target}",
                "--markdown", str(md), "--json", timeout=1800)
    assert p.returncode in (0, 1), p.stderr
    report = json.loads(p.stdout)
    validate(report)
    return p.returncode, report, md.read_text()


def test_the_wired_closure_passes_the_gate(closures, tmp_path):
    code, report, md = gate(closures["torch"], tmp_path)
    assert code == 0, report["findings"]
    (t,) = report["targets"]
    assert t["passed"] and t["closure_size"] < 7 << 30
    names = {os.path.basename(p)[33:] for p in t["roots"]}
    assert names == {"python3.11-torch-2.14.1"}
    assert "✅ passed" in md
    # Nothing of dev, static or stubs: only lib outputs and the C and C++ runtimes.
    p = run_cli("size", closures["torch"], "--all", "--json", timeout=600)
    paths = [os.path.basename(r["path"])[33:] for r in json.loads(p.stdout)["paths"]]
    assert all(n.endswith("-lib") or n.startswith(("python3.11-torch", "gcc-14-lib", "glibc-2.40")) for n in paths), paths


def test_magma_and_a_toolkit_runpath_fail_it_with_the_right_chains(closures, tmp_path):
    code, report, md = gate(closures["bad"], tmp_path)
    assert code == 1
    found = {f["file"]: f for f in report["findings"] if f["rule"] == "forbidden-path"}
    assert set(found) == {closures["magma"], closures["toolkit"]}
    toolkit = found[closures["toolkit"]]
    assert toolkit["chain"] == [closures["bad"], closures["toolkit"]]
    (hop,) = toolkit["hops"]
    assert [(e["file"], e["kind"]) for e in hop["evidence"]] == [
        ("lib/python3.11/site-packages/torch/lib/libtorch_cuda.so", "runpath-unused")]
    magma = found[closures["magma"]]
    assert [(e["file"], e["kind"], e["offset"]) for e in magma["hops"][0]["evidence"]] == [
        ("lib/python3.11/site-packages/torch/share/cmake/Caffe2/Caffe2Targets.cmake", "text",
         len('set(MAGMA_ROOT "') + len(os.path.dirname(closures["magma"])) + 1)]
    assert "❌ failed" in md and "magma-2.9.0" in md


def test_the_loader_finds_every_library_of_torch(closures):
    p = run_cli("audit", "--json", closures["torch"], timeout=600)
    report = json.loads(p.stdout)
    torch_own = [f for f in report["findings"] if f["severity"] == "error"]
    assert torch_own == [], [f["message"] for f in torch_own]
    assert shutil.which("nix")  # the audit ran in nix-store mode, hermetically
    assert report["mode"] == "nix-store"
