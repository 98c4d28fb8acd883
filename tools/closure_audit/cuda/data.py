"""The tables shared with the Nix library and the hooks (lib/data), as
installed: the nixcuda_data package. Read from its directory, not through
importlib.resources, which cannot read the namespace package an editable
install maps (Python 3.11)."""

from __future__ import annotations

import functools
import json
import os


@functools.lru_cache(maxsize=None)
def table(name: str) -> dict:
    """A JSON table of lib/data."""
    return json.loads(text(name))


def text(name: str) -> str:
    """A file of lib/data, as text."""
    import nixcuda_data

    for directory in nixcuda_data.__path__:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    raise FileNotFoundError(f"{name} is in none of {list(nixcuda_data.__path__)}")
