"""The GPU code a derivation asks its build for, read from its environment
as nixpkgs' CUDA packages write it (docs/nix/options.md), and the verdict
it gives on a GPU before anything is built."""

from __future__ import annotations

from closure_audit.drv.derivation import Derivation
from closure_audit.drv.requested import requested
from closure_audit.findings.runs import judge_request


def drv(env: dict) -> Derivation:
    return Derivation(path="/nix/store/" + "a" * 32 + "-x.drv", outputs={"out": "/nix/store/" + "a" * 32 + "-x"},
                      input_drvs={}, input_srcs=(), system="x86_64-linux", builder="/bin/sh", args=(),
                      env={"name": "x", **env})


def test_each_spelling():
    assert requested(drv({"cudaCapabilities": "7.5;8.9"})) == ({(7, 5, ""), (8, 9, "")}, set())
    assert requested(drv({"TORCH_CUDA_ARCH_LIST": "8.6;9.0+PTX"})) == ({(8, 6, ""), (9, 0, "")}, {(9, 0, "")})
    assert requested(drv({"cmakeFlags": "-GNinja -DCMAKE_CUDA_ARCHITECTURES=86-real;90-real;90-virtual"})) == (
        {(8, 6, ""), (9, 0, "")}, {(9, 0, "")})
    assert requested(drv({"CMAKE_CUDA_ARCHITECTURES": "89"})) == ({(8, 9, "")}, {(8, 9, "")})
    assert requested(drv({"cudaCapabilities": "10.0a"})) == ({(10, 0, "a")}, set())
    assert requested(drv({"name": "zlib"})) is None
    assert requested(drv({"cudaCapabilities": "not a list"})) is None


def test_verdicts_before_the_build():
    devices = [(8, 6), (8, 9), (9, 0), (10, 0), (10, 3)]
    got = {v.gpu: v.verdict for v in judge_request(({(8, 9, "")}, set()), devices)}
    assert got == {"8.6": "does-not-run", "8.9": "native", "9.0": "does-not-run", "10.0": "does-not-run",
                   "10.3": "does-not-run"}
    got = {v.gpu: v.verdict for v in judge_request(({(8, 6, "")}, {(9, 0, "")}), devices)}
    assert got == {"8.6": "native", "8.9": "native", "9.0": "jit", "10.0": "jit", "10.3": "jit"}
    got = {v.gpu: v.verdict for v in judge_request(({(10, 0, "a")}, set()), devices)}
    assert got["10.0"] == "native" and got["10.3"] == "does-not-run"
    assert {v.verdict for v in judge_request(None, devices)} == {"unknown"}
    # A CUDA 13 runtime under a 12.8 driver: nothing runs, whatever is requested.
    assert {v.verdict for v in judge_request(({(8, 9, "")}, set()), devices, {13}, (12, 8))} == {"does-not-run"}
