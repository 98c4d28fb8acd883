"""nix-store mode on real store paths built by Nix."""

from __future__ import annotations

import json
import os

from conftest import run_cli
from nixstore import needs_nix, nix_build

pytestmark = needs_nix

BODY = r"""
rec {
  cudart = sh "fixture-cudart-13.0" ''
    mkdir -p $out/lib
    echo 'int cudart(void) { return 13; }' > c.c
    gcc -shared -fPIC -o $out/lib/libcudart.so.13 c.c -Wl,-soname,libcudart.so.13
  '';
  stubs = sh "fixture-cuda-stubs" ''
    mkdir -p $out/lib/stubs
    echo 'int cuInit(int f) { return 100; }' > s.c
    gcc -shared -fPIC -o $out/lib/stubs/libcuda.so s.c -Wl,-soname,libcuda.so.1
  '';
  good = sh "fixture-good-torch" ''
    mkdir -p $out/lib
    echo 'int cudart(void); int cuInit(int); int t(void) { return cudart() + cuInit(0); }' > t.c
    gcc -shared -fPIC -o $out/lib/libtorch.so t.c -L${cudart}/lib -l:libcudart.so.13 \
      -L${stubs}/lib/stubs -lcuda -Wl,-rpath,${cudart}/lib:/run/opengl-driver/lib
  '';
  bad = sh "fixture-bad-torch" ''
    mkdir -p $out/lib
    echo 'int cudart(void); int cuInit(int); int t(void) { return cudart() + cuInit(0); }' > t.c
    gcc -shared -fPIC -o $out/lib/libtorch.so t.c -L${cudart}/lib -l:libcudart.so.13 \
      -L${stubs}/lib/stubs -lcuda -Wl,-rpath,${stubs}/lib/stubs:/build/source/lib
  '';
}
"""


def test_store_paths(tmp_path):
    good, bad = nix_build(tmp_path, BODY + ".good"), nix_build(tmp_path, BODY + ".bad")
    p = run_cli("audit", "--json", *good)
    report = json.loads(p.stdout)
    assert report["mode"] == "nix-store" and p.returncode == 0, report["findings"]
    assert report["summary"]["elf_files"] == 1

    p = run_cli("audit", "--json", *bad)
    assert p.returncode == 1
    found = {(f["rule"], f.get("needed") or f.get("entry")) for f in json.loads(p.stdout)["findings"]}
    assert found == {
        ("unresolved-library", "libcudart.so.13"),
        ("missing-driver-runpath", "libcuda.so.1"),
        ("stub-in-runpath", [e for e in found if e[0] == "stub-in-runpath"][0][1]),
        ("runpath-impure", "/build/source/lib"),
        ("forbidden-path", None),  # the stubs' store path, kept in the closure by the runpath entry
    }
    stub = [e for e in found if e[0] == "stub-in-runpath"][0][1]
    assert stub.startswith("/nix/store/") and stub.endswith("-fixture-cuda-stubs/lib/stubs")


def test_result_symlink(tmp_path):
    (good,) = nix_build(tmp_path, BODY + ".good")
    os.symlink(good, tmp_path / "result")
    p = run_cli("audit", str(tmp_path / "result"))
    assert p.returncode == 0 and "nix-store mode" in p.stdout and good in p.stdout
