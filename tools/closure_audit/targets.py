"""What the user named: one resolver turns every target (a path, a result
link, an installable, a saved closure, a wheel) into a path, and the targets
of an audit into the mode they put it in (every target in the Nix store, or
none) and the trees libraries must resolve in."""

from __future__ import annotations

import os
import re
from collections import namedtuple

from .errors import ClosureError, TargetError
from .nix.storepath import store_dir, top_store_path

# What a closure command (size, why, diff, gate, report) takes as a target.
CLOSURE_TARGETS = ("a store path, a result link, an installable (.#attr) or a saved "
                   "`nix path-info --json --recursive` dump")


class Target(namedtuple("Target", "given path store_path")):
    """One target, resolved: as the user wrote it, its real path (an
    installable's store path), and the store path that holds it, if any.
    A named tuple of collections: `--help` and `archs` import this module,
    and start without the dataclasses and typing modules (docs/scale.md)."""

    __slots__ = ()

    @property
    def saved_closure(self) -> bool:
        """A regular file outside the store: a saved path-info dump, where a
        closure is expected."""
        return self.store_path is None and os.path.isfile(self.path)

    def closure_root(self) -> str:
        """The store path whose closure the target names."""
        if self.store_path is None:
            raise TargetError(f"not in the Nix store: {self.given}")
        return self.store_path


# A flake reference without an attribute (github:owner/repo, path:/dir) is an
# installable too.
_FLAKE_REF = re.compile(r"[a-z][a-z0-9+.-]*:")


def is_installable(target: str) -> bool:
    """A name Nix evaluates: a flake output (.#torch, nixpkgs#hello) or a flake reference."""
    return "#" in target or bool(_FLAKE_REF.match(target))


def nowhere(target: str) -> TargetError:
    """The one error for a target that is neither a path here nor an installable."""
    return TargetError(f"target not found: {target}")


def resolve_target(target: str, build: bool = False, installables: bool = True) -> Target:
    """A target as a path: a path or a result link as its real path, an
    installable (.#torch, nixpkgs#hello) as its output's store path, built
    first with `build`; with `installables` False, paths only. Each reason a
    target cannot be read is one error."""
    store = store_dir()
    if os.path.lexists(target):
        try:
            os.stat(target)
        except OSError as exc:
            raise TargetError(f"cannot read target {target}: {exc.strerror}") from None
        real = os.path.realpath(target)
        return Target(target, real, top_store_path(real, store))
    if target.startswith(store + "/"):
        raise TargetError(f"path '{target}' is not in the store")
    if not installables or not is_installable(target):
        raise nowhere(target)
    path = _installable(target, build)
    return Target(target, path, path)


def _installable(target: str, build: bool) -> str:
    from .nix.command import nix  # subprocess and shutil: only for installables, start-up stays lean

    if build:
        nix("build", "--no-link", target, what=f"building {target}")
    try:
        out = nix("path-info", target, what=target)
    except ClosureError as exc:
        # Nix evaluated the installable and found its output missing: the one
        # failure that building mends (not a missing flake, attribute or file).
        if not build and re.search(r"path '[^']*' is not valid$", str(exc)):
            raise ClosureError(f"{exc} (not built? pass --build)") from None
        raise
    paths = out.split()
    if not paths:
        raise ClosureError(f"{target}: nix returned no store path")
    return paths[0]


def is_wheel(path: str) -> bool:
    """A Python wheel: audited as the tree it unpacks to."""
    return path.endswith(".whl") and os.path.isfile(path)


# pip's install directory under a prefix: lib/python3.12/site-packages,
# Debian's lib/python3/dist-packages.
_SITE = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?t?/(?:site|dist)-packages$")


def tree_root_for_file(path: str) -> str | None:
    """The environment a lone file belongs to: the nearest enclosing venv or
    conda env, else the site-packages (or dist-packages) of a Python prefix,
    else the outermost directory holding a *.dist-info folder (pip install
    --target DIR, under any name; outermost, as packages may vendor their
    own dist-info), else None. Of a bare prefix only site-packages is the
    tree, not the prefix: /usr/local holds /usr/local/lib, a host directory,
    and often /usr/local/cuda, the very host copy a tree must not rely on."""
    ancestors = []
    probe = os.path.dirname(path)
    while probe not in ("/", ""):
        ancestors.append(probe)
        probe = os.path.dirname(probe)
    env = next((a for a in ancestors if os.path.exists(os.path.join(a, "pyvenv.cfg"))
                or os.path.isdir(os.path.join(a, "conda-meta"))), None)
    return env or next((a for a in ancestors if _SITE.search(a)), None) or next(
        (a for a in reversed(ancestors) if _holds_dist_info(a)), None)


def _holds_dist_info(directory: str) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith(".dist-info") and e.is_dir() for e in entries)
    except OSError:
        return False


class Targets(namedtuple("Targets", "reals mode roots unrooted")):
    """The targets of one audit, resolved (a named tuple, as Target is): their
    real paths in the order given, the mode ("nix-store" or "tree"), the
    trees libraries must resolve in, and the file targets whose tree could
    not be told (their directory stands in)."""

    __slots__ = ()


def resolve_targets(targets: list[str], root: str | None = None) -> Targets:
    """Real paths of the targets (paths: a command resolves installables
    first), the common mode, the tree roots, and the file targets whose tree
    could not be told."""
    if not targets:
        raise TargetError("no target given")
    store = store_dir()
    reals, modes, roots, unrooted = [], set(), [], []
    for t in targets:
        real = resolve_target(t, installables=False).path
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
    return Targets(reals, mode, tuple(dict.fromkeys(roots)), tuple(unrooted) if mode == "tree" else ())
