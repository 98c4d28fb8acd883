"""The tables shared with the Nix library (lib/data/*.json), as installed: the
nixcuda_data package. Read from its directory, not through
importlib.resources, which cannot read the namespace package an editable
install maps (Python 3.11)."""

from __future__ import annotations

import functools
import json
import os


@functools.lru_cache(maxsize=None)
def table(name: str) -> dict:
    import nixcuda_data

    for directory in nixcuda_data.__path__:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return json.load(f)
    raise FileNotFoundError(f"{name} is in none of {list(nixcuda_data.__path__)}")
