"""Opt-in: NVIDIA's real CUDA 13 wheels (cuBLAS, cudart, ...).

Set NIXCUDA_WHEELHOUSE to a directory of NVIDIA's wheels (`pip download
nvidia-cuda-runtime==13.0.96 nvidia-cublas==13.1.0.3 ... --no-deps`) and run
`ci/test -m wheels`.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import hookfile
import redist_fixture
from conftest import ROOT, cli_json, run_cli
from nixstore import needs_nix, nix_build, path_info
from wheelfiles import opened_rows
from redist_features.archive import WHEEL_TO_REDIST
from redist_features.inspect import inspect

HOUSE = os.environ.get("NIXCUDA_WHEELHOUSE")
pytestmark = [pytest.mark.wheels, pytest.mark.skipif(not HOUSE, reason="set NIXCUDA_WHEELHOUSE to NVIDIA wheels")]


def wheels() -> list[str]:
    found = sorted(glob.glob(os.path.join(HOUSE or "", "nvidia_*.whl")))
    assert found, "NIXCUDA_WHEELHOUSE holds no nvidia_*.whl"
    return found


def test_every_wheel_is_read():
    for w in wheels():
        r = inspect(w)
        assert r.source.package in WHEEL_TO_REDIST.values(), w
        assert r.outputs, w
        if r.source.package in ("libcublas", "cuda_cudart", "libcufft", "libcusparse", "libcusolver"):
            assert "lib" in r.outputs and "dev" in r.outputs, w


def test_the_runtime_wheel_opens_the_driver_as_its_unpacked_tree_does(tmp_path):
    """The CUDA runtime opens libcuda.so.1 itself: audited as a wheel, in
    memory, its read-only data says so as the unpacked files do."""
    (w,) = [os.path.realpath(w) for w in wheels() if os.path.basename(w).startswith("nvidia_cuda_runtime-")]
    with zipfile.ZipFile(w) as z:
        z.extractall(tmp_path / "site")
    (_, wheel), (_, tree) = cli_json("audit", w), cli_json("audit", str(tmp_path / "site"))
    assert ("nvidia/cu13/lib/libcudart.so.13", "libcuda.so.1", "driver") in {
        (r["file"][len(w) + 1:], r["name"], r["class"]) for r in wheel["opened"]}
    assert opened_rows(wheel, w) == opened_rows(tree, str(tmp_path / "site"))
    assert wheel["summary"]["bytes_scanned"] == tree["summary"]["bytes_scanned"] > 0


def _cudart_tarball(tmp_path: Path) -> Path:
    (w,) = [w for w in wheels() if os.path.basename(w).startswith("nvidia_cuda_runtime-")]
    return redist_fixture.wheel_to_redist(Path(w), tmp_path)


def test_redist_layout_tarball_from_the_real_wheel(tmp_path):
    archive = _cudart_tarball(tmp_path)
    p = subprocess.run([sys.executable, "-m", "redist_features", str(archive), "--json"], capture_output=True,
                       text=True, check=True)
    (pkg,) = json.loads(p.stdout)["packages"]
    assert pkg["package"] == "cuda_cudart" and pkg["outputs"] == ["lib", "static", "dev"]
    assert pkg["files"]["lib"] == 2  # libcudart.so.13 and the symlink


@needs_nix
def test_split_build_of_the_real_cudart(tmp_path):
    archive = _cudart_tarball(tmp_path)
    hook_split, hook_rp = hookfile.split_substituted(tmp_path), hookfile.substituted(tmp_path)
    consumer, out, lib, static, dev = nix_build(tmp_path, f'''
      let
        cudart = builtins.derivation {{
          name = "cuda13.0-cuda_cudart-13.0.96"; inherit system; builder = "/bin/bash";
          outputs = [ "out" "lib" "static" "dev" ]; splitRedistStrict = "1";
          PATH = "/usr/local/bin:/usr/bin:/bin"; src = {archive}; split = {hook_split}; rp = {hook_rp};
          args = [ "-euo" "pipefail" "-c" \'\'
            mkdir -p $out && tar -xJf $src -C $out --strip-components=1
            source $split; splitRedistOutputs
            source $rp; autoAddOpenGLRunpath
            propagateRedistOutputs
          \'\' ];
        }};
        consumer = builtins.derivation {{
          name = "cudart-consumer-1.0"; inherit system; builder = "/bin/bash";
          PATH = "/usr/local/bin:/usr/bin:/bin";
          args = [ "-euo" "pipefail" "-c" \'\'
            mkdir -p $out/bin
            printf 'int cudaRuntimeGetVersion(int *);\\nint main(void) {{ int v = 0; return cudaRuntimeGetVersion(&v); }}\\n' > m.c
            gcc -o $out/bin/app m.c -L${{cudart.lib}}/lib -lcudart \\
              -Wl,--enable-new-dtags,-rpath,${{cudart.lib}}/lib
          \'\' ];
        }};
      in [ consumer cudart.out cudart.lib cudart.static cudart.dev ]''')
    assert (Path(lib) / "lib/libcudart.so.13").is_file() and (Path(static) / "lib/libcudart_static.a").is_file()
    assert (Path(dev) / "include/cuda_runtime_api.h").is_file()
    closure = set(path_info(consumer))
    assert lib in closure and not closure & {dev, static, out}
    p = run_cli("audit", "--json", lib)  # the real libcudart, hermetically: nothing missing
    report = json.loads(p.stdout)
    assert report["mode"] == "nix-store" and p.returncode == 0, report["findings"]
    p = run_cli("audit", "--json", "--tree", f"{lib}/lib/libcudart.so.13", lib)
    assert json.loads(p.stdout)["tree"]["path"].endswith("libcudart.so.13")
