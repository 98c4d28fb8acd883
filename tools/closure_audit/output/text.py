"""Untrusted names (file names, store paths, messages built from them) made
safe to print: what a terminal would act on never reaches it."""

from __future__ import annotations

import os
import re

# C0 controls (ESC, CR, BEL, newline, ...), DEL and C1 controls: a name holding
# them could move the cursor, recolour or rewrite what is already printed.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def utf8(text: str) -> str:
    """A name as UTF-8 text: bytes that are not UTF-8 become \\xNN escapes
    (what JSON needs; JSON escapes control characters itself)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")


def printable(text: str) -> str:
    """A name as text for a terminal or Markdown: bytes that are not UTF-8
    and control characters become \\xNN escapes. Markup in it is never
    interpreted (the consoles of output/terminal/ print text as it is)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", utf8(text))


def version_change(old: list[str], new: list[str]) -> str:
    """A package's versions before and after: `2.1.0 → 2.2.0`; ∅ for a side
    without the package; "(no version)" for a name that carries none."""
    def side(versions: list[str]) -> str:
        return ", ".join(v or "(no version)" for v in versions) or "∅"
    if old == new and all(not v for v in old):
        return "(no version)"
    return printable(f"{side(old)} → {side(new)}")
