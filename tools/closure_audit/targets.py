"""What the user named: targets as real paths, the mode they put the audit in
(every target in the Nix store, or none), and the trees libraries must
resolve in."""

from __future__ import annotations

import os
import re

from .errors import TargetError
from .storepath import store_dir

# What a closure command (size, why, diff, gate, report) takes as a target.
CLOSURE_TARGETS = ("a store path, a result link, an installable (.#attr) or a saved "
                   "`nix path-info --json --recursive` dump")


def is_wheel(path: str) -> bool:
    """A Python wheel: audited as the tree it unpacks to."""
    return path.endswith(".whl") and os.path.isfile(path)


# pip's install directory under a prefix: lib/python3.12/site-packages,
# Debian's lib/python3/dist-packages.
_SITE = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?t?/(?:site|dist)-packages$")


def tree_root_for_file(path: str) -> str | None:
    """The environment a lone file belongs to: the nearest enclosing venv or
    conda env, else the site-packages (or dist-packages) of a Python prefix,
    else None. Of a bare prefix only site-packages is the tree, not the prefix:
    /usr/local holds /usr/local/lib, a host directory, and often
    /usr/local/cuda, the very host copy a tree must not rely on."""
    ancestors = []
    probe = os.path.dirname(path)
    while probe not in ("/", ""):
        ancestors.append(probe)
        probe = os.path.dirname(probe)
    env = next((a for a in ancestors if os.path.exists(os.path.join(a, "pyvenv.cfg"))
                or os.path.isdir(os.path.join(a, "conda-meta"))), None)
    return env or next((a for a in ancestors if _SITE.search(a)), None)


def resolve_targets(targets: list[str], root: str | None = None
                    ) -> tuple[list[str], str, tuple[str, ...], tuple[str, ...]]:
    """Real paths of the targets, the common mode, the tree roots, and the
    file targets whose tree could not be told (their directory stands in)."""
    if not targets:
        raise TargetError("no target given")
    store = store_dir()
    reals, modes, roots, unrooted = [], set(), [], []
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
            found = tree_root_for_file(real)
            if found is None:
                unrooted.append(real)
            roots.append(found or os.path.dirname(real))
    if len(modes) > 1:
        raise TargetError("targets mix Nix store paths and other trees; audit them in separate runs")
    if root is not None:
        if not os.path.isdir(root):
            raise TargetError(f"--root is not a directory: {root}")
        roots = [os.path.realpath(root)] + [r for r in reals if is_wheel(r)]
        unrooted = []
    mode = modes.pop()
    return reals, mode, tuple(dict.fromkeys(roots)), tuple(unrooted) if mode == "tree" else ()
