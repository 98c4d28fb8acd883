"""Opt-in: the process model on real wheels: cupy-cuda13x 14.2.0, its
cuda-pathfinder and NVIDIA's CUDA 13 wheels (torch optional), on a host whose
ld.so.conf names a CUDA 13 directory with the same sonames (what makes a
runpath-less CuPy module alone map the host's copy), or with
NIXCUDA_HOST_CUDA naming a directory that stands for it.

Set NIXCUDA_WHEELS to a tree holding them as pip lays them out; run with
`ci/test -m wheels`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil

import pytest

from conftest import run_cli
from closure_audit.loader.environment import default_host_dirs

TREE = os.environ.get("NIXCUDA_WHEELS")
HOST = os.environ.get("NIXCUDA_HOST_CUDA")
pytestmark = [pytest.mark.wheels, pytest.mark.skipif(not TREE, reason="set NIXCUDA_WHEELS to a CuPy + CUDA tree")]
NEEDS = ("libcufft.so.12", "libcublas.so.13", "libnvrtc.so.13")


def _site() -> str:
    found = glob.glob(os.path.join(TREE, "**", "cupy", "cuda", "cufft*.so"), recursive=True)
    if not found:
        pytest.skip("NIXCUDA_WHEELS holds no CuPy")
    return os.path.dirname(os.path.dirname(os.path.dirname(found[0])))


def _host_dirs() -> list[str]:
    return [HOST, *default_host_dirs()] if HOST else list(default_host_dirs())


def _host_has(name: str) -> bool:
    return any(os.path.exists(os.path.join(d, name)) for d in _host_dirs())


def _audit(tree: str, tmp_path) -> dict:
    policy = tmp_path / "policy.toml"
    policy.write_text(f'schema = "closure-audit-policy/1"\n[host]\ndirectories = {json.dumps(_host_dirs())}\n')
    p = run_cli("audit", "--json", "--policy", str(policy), tree, timeout=600)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_cupys_cuda_needs_are_conditional_on_cuda_pathfinder(tmp_path):
    site = _site()
    if not all(_host_has(n) for n in NEEDS):
        pytest.skip("this host's ld.so.conf directories (and NIXCUDA_HOST_CUDA) do not hold CUDA 13's sonames")
    report = _audit(TREE, tmp_path)
    for f in report["findings"]:
        if "not in the tree" in f["message"]:
            assert not glob.glob(os.path.join(site, "nvidia", "*", "lib", f["needed"])), f["message"]
    for name in NEEDS:
        hits = [f for f in report["findings"] if f["rule"] == "preloaded-library" and f["needed"] == name
                and "/cupy" in f["file"]]
        assert hits, name
        for f in hits:
            assert f["severity"] == "warning" and f["loaded_by"] in ("cuda-pathfinder", "torch")
            assert os.path.isfile(f["tree_path"]) and os.path.realpath(f["tree_path"]).startswith(
                os.path.realpath(site)) and f["host_path"]

    # Without the tree's libcufft, the host's is all there is: an error.
    copy = tmp_path / "tree"
    shutil.copytree(site, copy, symlinks=True, copy_function=_link_or_copy)
    for path in glob.glob(str(copy / "nvidia" / "*" / "lib" / "libcufft.so.12")):
        os.unlink(path)
    report = _audit(str(copy), tmp_path)
    (f,) = [f for f in report["findings"] if f["rule"] == "cuda-library-from-host" and f["needed"] == "libcufft.so.12"]
    assert f["severity"] == "error" and any("/cupy/" in o for o in f["objects"])


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
