"""The tables shared with the Nix library (lib/data/*.json): from the source
tree when running from it, else as installed (the nixcuda_data package)."""

from __future__ import annotations

import functools
import json
import os


@functools.lru_cache(maxsize=None)
def table(name: str) -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.join(here, "..", "..", "lib", "data", name)
    if os.path.exists(source):
        with open(source, encoding="utf-8") as f:
            return json.load(f)
    from importlib.resources import files

    return json.loads((files("nixcuda_data") / name).read_text())
