"""What the user named, resolved once, at the door: only commands/ (and
cli) call the resolver. A target (a path, a result link, an installable, a
saved closure, a wheel, a derivation) becomes a Target that says what kind of
thing it is; the targets an audit reads together become a Scope that says
how it reads them (modes.NIX_STORE or modes.TREE) and the trees their
libraries must resolve in. ops/ and the layers below take Targets and Scopes
and never tell a kind or a mode again (tests/project/test_targets_once.py)."""

from __future__ import annotations

import os
import re
from collections import namedtuple

from .errors import DerivationError, TargetError
from .modes import NIX_STORE, TREE as TREE_MODE, Mode
from .nix.installables import derivation_of, deriver_of, output_path
from .nix.storepath import store_dir, top_store_path
from .util import is_wheel

# The kinds of target.
STORE = "store"  # a path in the Nix store (or an installable's output)
TREE = "tree"  # a directory or a file outside the store: a venv, a conda env, a tree of libraries
WHEEL = "wheel"  # a Python wheel, audited as the tree it unpacks to, wherever it lies
DUMP = "dump"  # a saved `nix path-info --json --recursive` dump, where a closure is expected
DERIVATION = "derivation"  # a .drv store path (why-build)


class Target(namedtuple("Target", "given path store_path kind")):
    """One target, resolved: as the user wrote it, its real path (an
    installable's store path), the store path that holds it, if any, and its
    kind (STORE, TREE, WHEEL, DUMP, DERIVATION). A named tuple of collections:
    `--help` and `archs` import this module, and start without the
    dataclasses and typing modules (docs/engineering/scale.md)."""

    __slots__ = ()

    @property
    def in_store(self) -> bool:
        """Audited in nix-store mode: anything under the store directory but
        a wheel, which is the tree pip would unpack, wherever it lies."""
        return self.kind != WHEEL and self.path.startswith(store_dir() + "/")

    @property
    def is_dump(self) -> bool:
        return self.kind == DUMP

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


def resolve_target(target: str, build: bool = False, *, installables: bool = True, closure: bool = False) -> Target:
    """A target as a path: a path or a result link as its real path, an
    installable (.#torch, nixpkgs#hello) as its output's store path, built
    first with `build`; with `installables` False, paths only. With `closure`
    (a closure is expected), a regular file outside the store is a saved
    dump. Each reason a target cannot be read is one error."""
    store = store_dir()
    if os.path.lexists(target):
        try:
            os.stat(target)
        except OSError as exc:
            raise TargetError(f"cannot read target {target}: {exc.strerror}") from None
        real = os.path.realpath(target)
        store_path = top_store_path(real, store)
        if is_wheel(real):
            kind = WHEEL
        elif store_path is not None:
            kind = STORE
        else:
            kind = DUMP if closure and os.path.isfile(real) else TREE
        return Target(target, real, store_path, kind)
    if target.startswith(store + "/"):
        raise TargetError(f"path '{target}' is not in the store")
    if not installables or not is_installable(target):
        raise nowhere(target)
    path = output_path(target, build)
    return Target(target, path, path, STORE)


def resolve_derivation(target: str) -> Target:
    """A target as the .drv path that builds it: a .drv store path, or an
    installable (`.#python3Packages.torch`, `nixpkgs#hello`) instantiated
    without building it (`nix path-info --derivation`). An output path (a
    `result` link) stands for the derivation that made it, where that is
    known here."""
    store = store_dir()
    if os.path.lexists(target) or target.startswith(store + "/"):
        path = os.path.realpath(target) if os.path.lexists(target) else target
        if top_store_path(path, store) != path:
            raise DerivationError(f"{target} is not a derivation (give a .drv store path or an installable)")
        if not path.endswith(".drv"):
            path = deriver_of(target, path)
        if not os.path.isfile(path):
            raise DerivationError(f"{target}: no such derivation in the local store")
        return Target(target, path, path, DERIVATION)
    if not is_installable(target):
        raise nowhere(target)
    path = derivation_of(target)
    return Target(target, path, path, DERIVATION)


class Scope(namedtuple("Scope", "targets paths mode roots unrooted")):
    """The targets one audit reads together: the Targets, their real paths,
    the Mode, the trees libraries must resolve in (--root, else each target's
    venv, conda env or site-packages, or the directory or wheel itself), and
    the file targets in tree mode whose tree could not be told."""

    __slots__ = ()


def scope_of(targets: list[Target], root: str | None = None) -> Scope:
    """The Scope of resolved targets; store paths and trees do not mix."""
    if not targets:
        raise TargetError("no target given")
    from .elf.walk import tree_root_for_file  # reads the directories above a file: only for an audit

    modes: set[Mode] = set()
    roots: list[str] = []
    unrooted: list[str] = []
    for t in targets:
        modes.add(NIX_STORE if t.in_store else TREE_MODE)
        if os.path.isdir(t.path) or t.kind == WHEEL:
            roots.append(t.path)
        else:
            found = tree_root_for_file(t.path)
            if found is None:
                unrooted.append(t.path)
            roots.append(found or os.path.dirname(t.path))
    if len(modes) > 1:
        raise TargetError("targets mix Nix store paths and other trees; audit them in separate runs")
    mode = modes.pop()
    if root is not None:
        if not os.path.isdir(root):
            raise TargetError(f"--root is not a directory: {root}")
        roots = [os.path.realpath(root)] + [t.path for t in targets if t.kind == WHEEL]
        unrooted = []
    return Scope(targets, [t.path for t in targets], mode, tuple(dict.fromkeys(roots)),
                 tuple(unrooted) if mode.tree else ())


def scopes_by_mode(targets: list[Target]) -> list[Scope]:
    """The targets in the groups one audit can take: store paths, then trees
    (a venv, a conda env, a wheel), each judged on its own (doctor)."""
    groups = [[t for t in targets if t.in_store], [t for t in targets if not t.in_store]]
    return [scope_of(g) for g in groups if g]
