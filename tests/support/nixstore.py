"""Build real Nix store paths for tests with `builtins.derivation`.

The builder is the host's /bin/sh and the host's gcc (Debian's nix-bin runs
with the sandbox off), so fixtures have real references, real closures and
real multi-output derivations without nixpkgs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from parts import needs

NIX_FLAGS = ["--extra-experimental-features", "nix-command flakes"]

PRELUDE = """
let
  system = builtins.currentSystem;
  # A derivation whose builder is a shell script run by the host's /bin/sh.
  sh = name: script: builtins.derivation {
    inherit name system;
    builder = "/bin/sh";
    args = [ "-ec" script ];
    PATH = "/usr/local/bin:/usr/bin:/bin";
  };
  # A store path holding lib/FILE: a shared object gcc builds from C `source`,
  # with extra linker flags.
  clib = name: file: source: flags: sh name ''
    mkdir -p $out/lib
    gcc -shared -fPIC -x c -o $out/lib/${file} ${builtins.toFile "c.c" source} ${flags}
  '';
  shOutputs = name: outputs: script: builtins.derivation {
    inherit name system outputs;
    builder = "/bin/sh";
    args = [ "-ec" script ];
    PATH = "/usr/local/bin:/usr/bin:/bin";
  };
in
"""


def have_nix() -> bool:
    """nix-build, and a store it can write: its own (single-user, as root) or a daemon's."""
    import os

    return shutil.which("nix-build") is not None and Path("/nix/store").is_dir() and (
        os.access("/nix/store", os.W_OK) or Path("/nix/var/nix/daemon-socket/socket").exists())


needs_nix = needs("Nix (Debian's nix-bin, set up by ci/setup)", have_nix(), nix=True)


def nix_build(tmp_path: Path, body: str, attr: str | None = None) -> list[str]:
    """Build `PRELUDE + body` (an expression); returns the output paths."""
    expr = tmp_path / "fixture.nix"
    expr.write_text(PRELUDE + body)
    # Fixtures are built here, never fetched: no time lost asking a binary cache.
    cmd = ["nix-build", str(expr), "--no-out-link", "--option", "substituters", ""]
    if attr:
        cmd += ["-A", attr]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"nix-build failed:\n{p.stderr[-3000:]}")
    return p.stdout.split()


def path_info(*paths: str, closure_size: bool = False) -> dict:
    """`nix path-info --json --recursive`, keyed by path whichever shape this
    Nix prints (a list before Nix 2.19, an object keyed by path since); the
    entries hold no "path"."""
    flags = ["--closure-size"] if closure_size else []
    p = subprocess.run(["nix", *NIX_FLAGS, "path-info", "--json", "--recursive", *flags, *paths],
                       capture_output=True, text=True, check=True)
    data = json.loads(p.stdout)
    if isinstance(data, list):
        return {e["path"]: {k: v for k, v in e.items() if k != "path"} for e in data}
    return data
