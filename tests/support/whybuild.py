"""The derivations why-build's tests plan: cudart and zlib shared, magma
and nccl reading `cudaCapabilities`, torch on them, an env on torch, each
named with a tag so that runs sharing a store never touch each other's paths."""

from __future__ import annotations

import subprocess

VARIANTS = r"""
{ tag, caps ? "7.5;8.0;8.6;8.9;9.0", zlibPatch ? false, system ? builtins.currentSystem }:
let
  # An output that references its inputs (its runtime closure) and compresses well.
  pkg = name: deps: env: builtins.derivation ({
    name = "${name}-${tag}";
    inherit system deps;
    builder = "/bin/sh";
    args = [ "-ec" ''
      mkdir -p $out
      for d in $deps; do echo "$d" >> $out/deps; done
      i=0; while [ $i -lt 400 ]; do echo "${name} ''${cudaCapabilities:-} $i" >> $out/lib.so; i=$((i+1)); done
    '' ];
    PATH = "/usr/local/bin:/usr/bin:/bin";
  } // env);
  cudart = pkg "cuda12.9-cudart-12.9.79" [ ] { };
  zlib = pkg "zlib-1.3.1" [ ] (if zlibPatch then {
    patches = [ (builtins.toFile "zlib-${tag}-cve.patch" "--- a\n+++ b\n") ];
  } else { });
  magma = pkg "magma-2.9.0" [ cudart ] { cudaCapabilities = caps; };
  nccl = pkg "nccl-2.28.3" [ cudart ] { cudaCapabilities = caps; };
  torch = pkg "torch-2.9.0" [ magma nccl zlib cudart ] { };
in pkg "python3-env" [ torch ] { }
"""


def instantiate(expr, tag: str, **args) -> str:
    cmd = ["nix-instantiate", str(expr), "--argstr", "tag", tag]
    for k, v in args.items():
        cmd += ["--arg", k, str(v).lower()] if isinstance(v, bool) else ["--argstr", k, v]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
