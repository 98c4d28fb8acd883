"""Untrusted names (file names, store paths, messages built from them) made
safe to print."""

from __future__ import annotations

import os


def printable(path: str) -> str:
    """A path as text: bytes that are not UTF-8 become \\xNN escapes."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
