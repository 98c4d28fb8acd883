"""Opt-in: the overlay on real nixpkgs. NIXPKGS names a nixpkgs checkout at
the revision flake.lock pins (the GitHub workflow passes the flake's own
input); nixpkgs at that revision needs Nix 2.18 or newer. With
config.cudaSupport = true, and again with cudaCapabilities = [ "8.6" ]:
PyTorch, torchWithCuda, triton-cuda, both cudatoolkits and magma-cuda-static
evaluate, and no member of cudaPackages_12_9 or cudaPackages_13_0 that
evaluates without the overlay fails with it. Nothing is built."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT
from contract_eval import PREDICATE, needs_nix_instantiate

NIXPKGS = os.environ.get("NIXPKGS")
pytestmark = [needs_nix_instantiate, pytest.mark.skipif(not NIXPKGS, reason="set NIXPKGS to a nixpkgs checkout at the pin")]

CONFIGS = {"defaults": f"{{ cudaSupport = true; {PREDICATE} }}",
           "8.6": f'{{ cudaSupport = true; cudaCapabilities = [ "8.6" ]; {PREDICATE} }}'}


def evaluate(expr: str):
    p = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr], capture_output=True,
                       text=True, cwd=ROOT, timeout=3600)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout)


def nixpkgs(config: str, overlays: str = "[ (import ./overlays).default ]") -> str:
    return f'(import {NIXPKGS} {{ system = "x86_64-linux"; overlays = {overlays}; config = {config}; }})'


def test_nix_is_new_enough_for_nixpkgs_at_the_pin():
    version = evaluate("builtins.nixVersion")
    assert evaluate(f'builtins.compareVersions "{version}" "2.18" >= 0'), \
        f"nixpkgs at the pin needs Nix 2.18 or newer, this is {version}"


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_the_headline_packages_evaluate(config):
    got = evaluate(f"""
      let p = {nixpkgs(config)}; in {{
        torch = p.python3Packages.torch.drvPath;
        torchWithCuda = p.python3Packages.torchWithCuda.drvPath;
        triton = p.python3Packages.triton-cuda.drvPath;
        cudatoolkit = p.cudaPackages.cudatoolkit.drvPath;
        cudatoolkit13 = p.cudaPackages_13_0.cudatoolkit.drvPath;
        magma = p.magma-cuda-static.drvPath;
        torchSet = p.python3Packages.torch.cudaPackages.cudaMajorMinorVersion;
      }}
    """)
    assert got.pop("torchSet") == "12.9"
    for name, path in got.items():
        assert path.endswith(".drv"), name


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_no_member_that_evaluates_without_the_overlay_fails_with_it(config):
    got = evaluate(f"""
      let
        with' = {nixpkgs(config)};
        without = {nixpkgs(config, overlays="[ ]")};
        ok = d: (builtins.tryEval (builtins.deepSeq d.drvPath true)).success;
        isDrv = d: (builtins.tryEval (builtins.isAttrs d && d.type or null == "derivation")).value == true;
        regressions = set: builtins.filter (n: isDrv without.${{set}}.${{n}} && ok without.${{set}}.${{n}}
          && !(ok with'.${{set}}.${{n}})) (builtins.attrNames without.${{set}});
      in {{
        "12.9" = regressions "cudaPackages_12_9";
        "13.0" = regressions "cudaPackages_13_0";
      }}
    """)
    assert got == {"12.9": [], "13.0": []}
