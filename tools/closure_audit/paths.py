"""File paths relative to the trees a command was given."""

from __future__ import annotations


def under(path: str, top: str) -> bool:
    """`path` is `top` or lies inside it."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def relative_to(path: str, roots: tuple[str, ...] | list[str]) -> str | None:
    """`path` relative to the first of `roots` that holds it, else None."""
    for root in roots:
        top = root.rstrip("/") + "/"
        if path.startswith(top):
            return path[len(top):]
    return None
