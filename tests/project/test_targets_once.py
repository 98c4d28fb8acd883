"""A target is told once: targets.py makes each Target (its kind) and the
Scope of an audit (its modes.Mode), and no other module of the package
compares a kind or a mode with a string. Below commands/, a layer asks a
Target or a Mode (`.in_store`, `.is_dump`, `.nix`, `.tree`) instead of
deciding again what a target is."""

from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "tools/closure_audit"
# Where kinds and modes are made, and so compared.
MAKERS = {"targets.py", "modes.py"}
VALUES = {"store", "tree", "wheel", "dump", "derivation", "nix-store"}
NAMES = {"kind", "mode"}
# targets.py's kinds and modes.py's modes, by name.
CONSTANTS = {"STORE", "TREE", "WHEEL", "DUMP", "DERIVATION", "NIX_STORE", "TREE_MODE"}


def _named(node: ast.AST) -> bool:
    """`kind`, `mode`, `x.kind`, `x.mode`."""
    return (isinstance(node, ast.Name) and node.id in NAMES) or (isinstance(node, ast.Attribute)
                                                                  and node.attr in NAMES)


def _value(node: ast.AST) -> bool:
    """A kind or a mode: its string, a constant of it, or a collection of them."""
    if isinstance(node, ast.Constant):
        return node.value in VALUES
    if isinstance(node, ast.Name):
        return node.id in CONSTANTS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_value(e) for e in node.elts)
    return False


def comparisons(tree: ast.AST) -> list[int]:
    """The lines comparing a kind or a mode with one of their values."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_named(s) for s in sides) and any(_value(s) for s in sides):
                out.append(node.lineno)
    return out


def test_no_module_but_the_makers_tells_a_kind_or_a_mode():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() in MAKERS:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in comparisons(ast.parse(path.read_text()))]
    assert not found, f"compare a kind or a mode here; ask the Target or the Mode instead: {found}"


def test_the_check_sees_each_form_of_comparison():
    source = ('t.kind == "store"\nmode == "tree"\nx.mode in ("nix-store", "tree")\nt.kind == DUMP\n'
              'walked.mode != "nix-store"\nc.kind == "sm"\nhost.kind == "nixos"\n')
    assert comparisons(ast.parse(source)) == [1, 2, 3, 4, 5]
