"""Wheels written for a test: a zip of the members given."""

from __future__ import annotations

import os
import zipfile


def make_wheel(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def opened_rows(report: dict, root: str) -> set:
    """An audit's `opened` rows, paths relative to `root` (a wheel, or the
    tree it unpacks into), to compare the two."""
    def rel(p):
        return None if p is None else os.path.relpath(p, root)
    return {(rel(r["file"]), r["name"], r["string"], r["offset"], r["class"], r["how"], rel(r["path"]), r["inside"])
            for r in report["opened"]}
