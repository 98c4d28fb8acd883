"""What users read, pinned: the terminal and JSON output of audit, why,
size, diff, gate, archs, doctor and why-build on fixtures, compared with
tests/snapshots/ (support/snapshots.py). A deliberate change of wording or of
a figure is made with `pytest --update-snapshots` and reviewed as a diff.

The closure commands read synthetic path-info dumps (support/synthetic.py:
the same paths and sizes on every machine); audit a tree gcc builds; doctor
a fake NixOS host; archs a fat binary nvcc builds; why-build derivations
Nix builds into a file:// cache."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import fakehost
import snapshots
import synthetic
from conftest import run_cli
from cudagen import Nvcc, find_nvcc, gencode
from nixstore import NIX_FLAGS, needs_nix
from parts import needs
from whybuild import VARIANTS, instantiate

COLUMNS = {"COLUMNS": "100", "NO_COLOR": "1"}


def shown(request, name: str, args: list[str], places: dict[str, str], env=None, status=(0, 1)) -> None:
    """Run the installed command, text then --json, and compare both."""
    for suffix, extra in ((".txt", []), (".json", ["--json"])):
        p = run_cli(*args, *extra, env={**COLUMNS, **(env or {})})
        assert p.returncode in status and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
        text = p.stdout if suffix == ".txt" else snapshots.json_text(p.stdout)
        snapshots.check(request, name + suffix, snapshots.scrub(text, places))


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("dumps")
    old, new = str(d / "old.json"), str(d / "new.json")
    synthetic.write(old, 24, seed=1)
    synthetic.write(new, 26, seed=2)
    budgets = d / "budgets.toml"
    budgets.write_text('schema = "closure-audit-budgets/1"\n[defaults]\nmax-added-size = "40 MiB"\n'
                       '[targets.app]\nmax-closure-size = "100 MiB"\n')
    return {"old": old, "new": new, "budgets": str(budgets), "places": {str(d): "<dumps>"}}


def test_size(request, dumps):
    shown(request, "size", ["size", "--path-info", dumps["new"], "--top", "8"], dumps["places"])


def test_why(request, dumps):
    shown(request, "why", ["why", "--path-info", dumps["new"]], dumps["places"])


def test_diff(request, dumps):
    shown(request, "diff", ["diff", dumps["old"], dumps["new"]], dumps["places"])


def test_gate(request, dumps):
    shown(request, "gate", ["gate", "--budgets", dumps["budgets"], "--path-info", f"app={dumps['new']}"],
          dumps["places"])


@pytest.mark.fhs
def test_audit(request, build):
    """A venv-shaped tree: torch's CUDA library reaches cuBLAS through its
    RPATH, but the CUDA runtime it needs only the host has (the policy's host
    directory, so the snapshot does not depend on this machine's CUDA)."""
    cublas = build.lib("site-packages/nvidia/cu13/lib/libcublas.so.13")
    cudart = build.lib("host/libcudart.so.13")
    torch = build.lib("site-packages/torch/lib/libtorch_cuda.so", links=[cublas, cudart],
                      rpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN"])
    build.lib("site-packages/torch/_C.so", links=[torch], rpath=["$ORIGIN/lib"])
    libc = [d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
            if os.path.exists(os.path.join(d, "libc.so.6"))]
    policy = build.root / "policy.toml"
    policy.write_text("[host]\ndirectories = %s\n" % json.dumps([str(build.root / "host"), *libc]))
    shown(request, "audit", ["audit", "--policy", str(policy), str(build.root / "site-packages")],
          {str(build.root): "<tree>", **{d: f"<libc dir {i}>" for i, d in enumerate(libc, 1)}})


@pytest.mark.fhs
def test_doctor(request, tmp_path):
    host = fakehost.nixos(tmp_path / "root")
    shown(request, "doctor", ["doctor", "--host-root", str(host.root)], {str(tmp_path): "<tmp>"},
          env={"PATH": "/fakebin:/usr/bin:/bin"})


NVCC = find_nvcc()


@needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", NVCC is not None)
def test_archs(request, tmp_path):
    """SASS for 8.6 and 9.0 with PTX for 9.0, asked for 8.0 and 9.0."""
    fat = Nvcc(NVCC, tmp_path).build("multi.so", gencode("86:sm_86", "90:[sm_90,compute_90]"))
    shown(request, "archs", ["archs", str(fat), "--capabilities", "8.0,9.0"], {str(tmp_path): "<tmp>"})


def test_a_changed_output_fails_and_the_flag_rewrites_it(tmp_path, monkeypatch):
    """The comparison itself: a changed line fails with its diff, a missing
    snapshot fails, and --update-snapshots writes both."""
    monkeypatch.setattr(snapshots, "DIRECTORY", tmp_path)

    class Request:
        def __init__(self, update):
            self.config = type("Config", (), {"getoption": lambda _self, _name: update})()

    (tmp_path / "x.txt").write_text("one\ntwo\n")
    snapshots.check(Request(False), "x.txt", "one\ntwo\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)-two.*\+three"):
        snapshots.check(Request(False), "x.txt", "one\nthree\n")
    with pytest.raises(pytest.fail.Exception, match="no snapshot"):
        snapshots.check(Request(False), "y.txt", "new\n")
    snapshots.check(Request(True), "x.txt", "one\nthree\n")
    snapshots.check(Request(True), "y.txt", "new\n")
    assert (tmp_path / "x.txt").read_text() == "one\nthree\n" and (tmp_path / "y.txt").read_text() == "new\n"


@pytest.fixture(scope="module")
def whybuild_cache(tmp_path_factory):
    """why-build's derivations with a fixed tag (the same store paths on every
    machine), built, copied to an uncompressed file:// cache (its sizes are
    the NARs' own, whatever compressor a Nix has) and deleted from the store."""
    tmp = tmp_path_factory.mktemp("whybuild")
    expr = tmp / "variants.nix"
    expr.write_text(VARIANTS)
    ref = instantiate(expr, "snapshot")
    built = subprocess.run(["nix-build", ref, "--no-out-link", "--option", "substituters", ""],
                           capture_output=True, text=True, check=True).stdout.split()
    cache = tmp / "cache"
    subprocess.run(["nix", *NIX_FLAGS, "copy", "--to", f"file://{cache}?compression=none", *built], check=True,
                   capture_output=True)
    closure = subprocess.run(["nix-store", "--query", "--requisites", *built], capture_output=True, text=True,
                             check=True).stdout.split()
    subprocess.run(["nix-store", "--delete", *closure], check=True, capture_output=True)
    return {"expr": expr, "ref": ref, "cache": cache, "places": {str(tmp): "<tmp>"}}


@needs_nix
def test_why_build(request, whybuild_cache, tmp_path, monkeypatch):
    """Narrowed capabilities: what Nix builds instead of fetching, and the setting behind it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    w = whybuild_cache
    target = instantiate(w["expr"], "snapshot", caps="8.9")
    shown(request, "why-build", ["why-build", target, "--like", w["ref"], "--store", f"file://{w['cache']}"],
          w["places"], env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
