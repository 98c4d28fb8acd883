"""What the user named: targets as real paths, the mode they put the audit in
(every target in the Nix store, or none), and the trees libraries must
resolve in."""

from __future__ import annotations

import os

from .errors import TargetError
from .storepath import store_dir

# What a closure command (size, why, diff, gate, report) takes as a target.
CLOSURE_TARGETS = ("a store path, a result link, an installable (.#attr) or a saved "
                   "`nix path-info --json --recursive` dump")


def is_wheel(path: str) -> bool:
    """A Python wheel: audited as the tree it unpacks to."""
    return path.endswith(".whl") and os.path.isfile(path)


def tree_root_for_file(path: str) -> str:
    """The environment a lone file belongs to: the nearest ancestor that is a
    venv, a conda env or a Python prefix, else the file's own directory."""
    d = os.path.dirname(path)
    probe = d
    while probe not in ("/", ""):
        if (os.path.exists(os.path.join(probe, "pyvenv.cfg"))
                or os.path.isdir(os.path.join(probe, "conda-meta"))):
            return probe
        probe = os.path.dirname(probe)
    return d


def resolve_targets(targets: list[str], root: str | None = None) -> tuple[list[str], str, tuple[str, ...]]:
    """Real paths of the targets, the common mode and the tree roots."""
    if not targets:
        raise TargetError("no target given")
    store = store_dir()
    reals, modes, roots = [], set(), []
    for t in targets:
        if not os.path.lexists(t):
            raise TargetError(f"target not found: {t}")
        try:
            os.stat(t)
        except OSError as exc:
            raise TargetError(f"cannot read target {t}: {exc.strerror}") from None
        real = os.path.realpath(t)
        reals.append(real)
        in_store = real.startswith(store + "/")
        # A wheel is the tree pip would unpack, wherever it lies.
        modes.add("nix-store" if in_store and not is_wheel(real) else "tree")
        if os.path.isdir(real) or is_wheel(real):
            roots.append(real)
        else:
            roots.append(tree_root_for_file(real))
    if len(modes) > 1:
        raise TargetError("targets mix Nix store paths and other trees; audit them in separate runs")
    if root is not None:
        if not os.path.isdir(root):
            raise TargetError(f"--root is not a directory: {root}")
        roots = [os.path.realpath(root)] + [r for r in reals if is_wheel(r)]
    return reals, modes.pop(), tuple(dict.fromkeys(roots))
