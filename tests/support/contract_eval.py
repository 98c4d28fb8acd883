"""Evaluating the overlay against a nixpkgs: the contract stub
(tests/contract/nixpkgs-contract-stub), on its own lib or, with NIXPKGS_LIB
set, on nixpkgs' real lib/; or a real nixpkgs checkout (NIXPKGS)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from conftest import ROOT
from parts import needs

STUB = "./tests/contract/nixpkgs-contract-stub"
FLAKE = "(import ./tests/contract/flake-outputs.nix)"
# Unfree software as the flake allows it: NVIDIA's licenses only.
PREDICATE = "allowUnfreePredicate = (import ./lib).cuda.allowUnfreePredicate;"
REAL_LIB = bool(os.environ.get("NIXPKGS_LIB"))

needs_nix_instantiate = needs("nix-instantiate (Debian's nix-bin)", shutil.which("nix-instantiate") is not None, nix=True)


def cuda(extra: str = "") -> str:
    """A config with CUDA on, NVIDIA's licenses accepted, and `extra`."""
    return f"{{ cudaSupport = true; {PREDICATE} {extra} }}"


def nix_eval(expr: str, check: bool = True, strict: bool = True):
    env = {k: v for k, v in os.environ.items() if k != "NIX_PATH"}
    # --read-write-mode: the store paths a value names (lib.fileset.toSource's
    # source) are copied, as when the derivation is instantiated; read-only
    # evaluation only computes their names.
    cmd = ["nix-instantiate", "--eval", "--read-write-mode", "--json", "-E", expr]
    if strict:
        cmd.insert(2, "--strict")
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    return p


def pkgs(overlays: str = "[ (import ./overlays).default ]", config: str = "{ }", system: str = "x86_64-linux",
         extra: str = "") -> str:
    return f'(import {STUB} {{ system = "{system}"; overlays = {overlays}; config = {config}; {extra} }})'


def error_line(stderr: str) -> str:
    """The line of an evaluation error that says what went wrong."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip().startswith("error:")]
    return lines[-1] if lines else stderr.strip().splitlines()[-1]


def hook_environment(outputs: dict, structured: bool) -> tuple[dict, str]:
    """How a builder hands a setup hook its outputs: one variable per output
    and, without structured attrs, the word list $outputs; with them, the
    associative array `outputs` and stdenv's getAllOutputNames over its keys
    (pkgs/stdenv/generic/setup.sh). Returns the environment and the bash to
    run first."""
    env = {name: str(path) for name, path in outputs.items()}
    if not structured:
        return {**env, "outputs": " ".join(outputs)}, ""
    array = " ".join(f"[{name}]={path}" for name, path in outputs.items())
    return env, f'declare -A outputs=({array}); getAllOutputNames() {{ echo "${{!outputs[*]}}"; }}; '
