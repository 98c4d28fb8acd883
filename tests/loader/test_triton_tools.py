"""Triton's knobs (loader/preloads/triton.py): the NVIDIA tools its compiler
runs (`env_nvidia_tool("NAME")`: TRITON_<NAME>_PATH, else the default its
class builds from `__file__`) and the CUPTI directory of its profiler
(`env_str("TRITON_CUPTI_LIB_PATH", DEFAULT)`), read from knobs.py in
Triton 3.9's shape. A default tool that is missing, or in a Nix store path
names an interpreter outside the store, is triton-tool-missing: what Triton
meets is an exec that fails with FileNotFoundError (which it passes over),
checked here by running the programs themselves."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from audits import audit, host_policy, rules, venv
from closure_audit.loader.preloads import read_preloads
from conftest import run_cli

pytestmark = pytest.mark.fhs

# triton/knobs.py's shape in 3.9.0: the tool class builds its default from __file__.
KNOBS = '''
import os
import pathlib
import sysconfig


class env_str:
    def __init__(self, key, default):
        self.key, self.default = key, default


class env_nvidia_tool:
    def __init__(self, binary: str) -> None:
        binary += sysconfig.get_config_var("EXE")
        self.binary = binary
        self.default_path = os.path.join(os.path.dirname(__file__), "backends", "nvidia", "bin", binary)
        self.key = f"TRITON_{binary.upper().replace('-', '_')}_PATH"


class nvidia_knobs:
    cuobjdump = env_nvidia_tool("cuobjdump")
    ptxas = env_nvidia_tool("ptxas")
    ptxas_blackwell = env_nvidia_tool("ptxas-blackwell")


class proton_knobs:
    cupti_lib_dir = env_str("TRITON_CUPTI_LIB_PATH", @CUPTI@)
    cupti_lib_blackwell_dir = env_str(
        "TRITON_CUPTI_LIB_BLACKWELL_PATH",
        str(pathlib.Path(__file__).parent.absolute() / "backends" / "nvidia" / "lib" / "cupti-blackwell"))
'''

BUNDLED_CUPTI = 'str(pathlib.Path(__file__).parent.absolute() / "backends" / "nvidia" / "lib" / "cupti")'

# What `ptxas --version` prints, the line Triton's NvidiaTool.from_path reads a release from.
VERSION = r'''
#include <stdio.h>
int main(void) { puts("Cuda compilation tools, release 13.0, V13.0.88"); return 0; }
'''


def program(build, rel: str):
    """A program that answers --version as NVIDIA's tools do."""
    out = build.path(rel)
    src = out.parent / f".{out.name}.c"
    src.write_text(VERSION)
    subprocess.run(["gcc", "-o", str(out), str(src)], check=True, capture_output=True)
    src.unlink()
    return out


def triton_tree(build, base: str, cupti: str = BUNDLED_CUPTI):
    """A Triton under `base` (site-relative paths) with ptxas bundled and
    ptxas-blackwell and cuobjdump not."""
    triton = build.path(f"{base}/triton/knobs.py").parent
    (triton / "knobs.py").write_text(KNOBS.replace("@CUPTI@", cupti))
    ptxas = program(build, f"{base}/triton/backends/nvidia/bin/ptxas")
    cupti_lib = build.lib(f"{base}/triton/backends/nvidia/lib/cupti/libcupti.so", soname="libcupti.so.12")
    return triton, ptxas, cupti_lib


def runs(path) -> str | None:
    """What running `path --version` gives Triton: the output, or None where
    the exec fails with FileNotFoundError (the file, or its interpreter)."""
    try:
        return subprocess.run([str(path), "--version"], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        return None


def test_a_missing_bundled_tool_in_a_venv(build, tmp_path):
    rel, site = venv(build.root)
    triton, ptxas, cupti = triton_tree(build, rel)
    assert "release 13.0" in runs(ptxas) and runs(triton / "backends/nvidia/bin/ptxas-blackwell") is None
    report = audit(build.root / "venv", policy=host_policy(tmp_path))
    found = {f.fields["tool"]: f for f in rules(report).get("triton-tool-missing", [])}
    assert set(found) == {"ptxas-blackwell", "cuobjdump"}
    f = found["ptxas-blackwell"]
    assert (f.severity, f.file, f.fields["variable"]) == ("warning", str(triton / "knobs.py"),
                                                          "TRITON_PTXAS_BLACKWELL_PATH")
    assert f.fields["default"] == str(triton / "backends/nvidia/bin/ptxas-blackwell")
    assert "is not there" in f.message and "Cannot find ptxas-blackwell" in f.message
    # The profiler's CUPTI: the knob's default directory, read from its expression.
    found = read_preloads((str(build.root / "venv"),), lambda d: frozenset(os.listdir(d)) if os.path.isdir(d)
                          else None)
    assert [p.path for p in found.preloads if p.framework == "triton"] == [str(cupti)]


def test_a_cupti_default_pointed_elsewhere_is_taken_as_written(build, tmp_path):
    """A build that points the knob's default at another CUPTI (an absolute
    path): the profiler opens that directory's libcupti.so, not the bundled one."""
    other = build.lib("cuda_cupti/lib/libcupti.so", soname="libcupti.so.13")
    rel, site = venv(build.root)
    triton_tree(build, rel, cupti=json.dumps(str(other.parent)))
    found = read_preloads((str(build.root / "venv"),), lambda d: frozenset(os.listdir(d)) if os.path.isdir(d)
                          else None)
    assert [p.path for p in found.preloads if p.framework == "triton"] == [str(other)]


def test_a_bundled_tool_that_cannot_run_on_nixos(build, monkeypatch):
    """In a Nix store path, the wheel's ptxas names /lib64's interpreter:
    NixOS has none, and exec fails with FileNotFoundError as for a missing
    file (shown with an interpreter path that does not exist here)."""
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    base = "store/bbbb-python3.12-triton-3.9.0/lib/python3.12/site-packages"
    triton, ptxas, _ = triton_tree(build, base)
    elsewhere = program(build, "nointerp/ptxas")
    subprocess.run(["patchelf", "--set-interpreter", "/nonexistent/ld-linux-x86-64.so.2", str(elsewhere)],
                   check=True)
    assert runs(elsewhere) is None and runs(ptxas) is not None
    out = store / "bbbb-python3.12-triton-3.9.0"
    found = {f.fields["tool"]: f for f in rules(audit(out)).get("triton-tool-missing", [])}
    assert set(found) == {"ptxas", "ptxas-blackwell", "cuobjdump"}
    assert "cannot run on NixOS: its interpreter /lib64/ld-linux-x86-64.so.2 is outside the store" in (
        found["ptxas"].message)
    # The command's JSON (checked against the schema by run_cli): exit status 1 for the
    # program's own interpreter-outside-store error, beside this warning.
    p = run_cli("audit", "--json", str(out), env={"NIX_STORE_DIR": str(store)})
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)["findings"]
    assert any(x["rule"] == "interpreter-outside-store" and x["file"] == str(ptxas) for x in report)
    (j,) = [x for x in report if x["rule"] == "triton-tool-missing" and x["tool"] == "ptxas"]
    assert (j["variable"], j["default"]) == ("TRITON_PTXAS_PATH", str(ptxas))


@pytest.mark.parametrize("knobs", ["absent", "other-shape"])
def test_no_tool_knob_read_no_finding(build, tmp_path, knobs):
    rel, site = venv(build.root)
    build.lib(f"{rel}/triton/_C/libtriton.so")
    if knobs == "other-shape":
        build.path(f"{rel}/triton/knobs.py").write_text('ptxas = env_opt_str("TRITON_PTXAS_PATH")\n')
    assert "triton-tool-missing" not in rules(audit(build.root / "venv", policy=host_policy(tmp_path)))
