"""The two ways an audit reads its targets, told once by targets.py:

- NIX_STORE: store paths and their closures; the loader's search is hermetic,
  as Nix's glibc's is, and forbidden paths and driver runpaths are judged;
- TREE: a venv, a conda env, a wheel or any directory outside the store,
  whose libraries may also come from the host's directories.

A Mode is the string the JSON contract prints ("nix-store", "tree"); the
layers below ask it `.nix` or `.tree` and never compare it with a string."""

from __future__ import annotations


class Mode(str):
    __slots__ = ()

    def __new__(cls, value: str) -> Mode:
        if value not in ("nix-store", "tree"):
            raise ValueError(f"not an audit mode: {value!r}")
        return super().__new__(cls, value)

    @property
    def nix(self) -> bool:
        return str.__eq__(self, "nix-store")

    @property
    def tree(self) -> bool:
        return not self.nix


NIX_STORE = Mode("nix-store")
TREE = Mode("tree")
