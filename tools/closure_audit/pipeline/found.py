"""The check every reading command makes of its targets before it judges:
each must hold an ELF file. Its own module, with nothing heavy imported, so
that `archs` makes it and still starts lean (docs/engineering/scale.md)."""

from __future__ import annotations

import os

from ..errors import TargetError


def check_found(walked) -> None:
    """Every target must hold a valid ELF file, except a store path, whose
    closure is audited all the same: a target that is a saved closure, holds
    no ELF file or only broken ones says so instead of passing."""
    for target in walked.targets:
        found = walked.scan.targets.get(target)
        if found is None or found.elf:
            continue
        if found.invalid:
            path, reason = found.invalid[0]
            if path == target:
                raise TargetError(f"{target} is not a valid ELF file: {reason}")
            raise TargetError(f"no valid ELF file in {target}: {len(found.invalid)} invalid, such as {path}: {reason}")
        if walked.mode.nix and os.path.isdir(target):
            continue
        from ..closure.graph import looks_like_dump  # numpy and igraph: only where needed, start-up stays lean

        if os.path.isfile(target) and looks_like_dump(target):
            raise TargetError(f"{target}: this is a path-info dump: use --path-info {target} (with the store "
                              f"paths it describes as targets), or `closure-audit why {target}`")
        raise TargetError(f"no ELF files in {target}")
