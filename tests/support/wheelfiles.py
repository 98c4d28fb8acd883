"""Wheels written for a test: a zip of the members given."""

from __future__ import annotations

import zipfile


def make_wheel(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path
