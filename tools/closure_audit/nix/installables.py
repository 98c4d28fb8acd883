"""What Nix says an installable or an output path is: the store path an
installable stands for (built first where asked), the derivation that
builds it, the derivation an output path came from. targets.py asks; the
commands run here, with nix/command.py's flags and one-line failures.

subprocess and shutil are imported only when an installable is named, so
start-up stays lean for paths."""

from __future__ import annotations

import os
import re

from ..errors import ClosureError, DerivationError


def output_path(installable: str, build: bool) -> str:
    """The store path of `installable`: the first `nix path-info` prints,
    built first with `build`."""
    from .command import nix

    if build:
        nix("build", "--no-link", installable, what=f"building {installable}")
    try:
        out = nix("path-info", installable, what=installable)
    except ClosureError as exc:
        # Nix evaluated the installable and found its output missing: the one
        # failure that building mends (not a missing flake, attribute or file).
        if not build and re.search(r"path '[^']*' is not valid$", str(exc)):
            raise ClosureError(f"{exc} (not built? pass --build)") from None
        raise
    paths = out.split()
    if not paths:
        raise ClosureError(f"{installable}: nix returned no store path")
    return paths[0]


def derivation_of(installable: str) -> str:
    """The .drv that builds `installable`, instantiated, not built."""
    from .command import nix

    out = nix("path-info", "--derivation", installable, what=f"instantiating {installable}").split()
    if len(out) != 1 or not out[0].endswith(".drv"):
        raise DerivationError(f"{installable} is not a derivation (nix path-info --derivation gives "
                              f"{' '.join(out) or 'nothing'})")
    return out[0]


def deriver_of(given: str, path: str) -> str:
    """The .drv an output path came from, where the local store knows it."""
    from .command import find, run

    tool = find("nix-store", error=DerivationError, why="to find the derivation of an output path")
    drv = run([tool, "--query", "--deriver", path], f"{given}", DerivationError).strip()
    if not drv.endswith(".drv") or not os.path.isfile(drv):
        raise DerivationError(f"{given} is not a derivation, nor the output of one known here (give a .drv "
                              f"store path or an installable)")
    return drv
