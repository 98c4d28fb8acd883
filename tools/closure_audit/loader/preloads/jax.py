"""JAX's CUDA plugin: `_load_nvidia_libraries` in
jax_plugins/xla_cuda*/__init__.py, at the plugin's initialization."""

from __future__ import annotations

import glob
import os

from .common import Listing, Preload, Preloads, calls, function, literal, parse

def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    for site in sites:
        for init in sorted(glob.glob(os.path.join(glob.escape(site), "jax_plugins", "xla_cuda*", "__init__.py"))):
            rel = os.path.relpath(init, site)
            tree = parse(init)
            func = function(tree, "_load_nvidia_libraries") if tree is not None else None
            if func is None:
                continue
            loads = calls(func, "_load")
            if not loads:
                out.notes.append(f"{rel}: _load_nvidia_libraries makes no _load(module, [names]) call; "
                                 f"JAX's preloads are not modelled")
                continue
            for call in loads:
                module, names = (literal(a) for a in call.args[:2]) if len(call.args) >= 2 else (None, None)
                if not isinstance(module, str) or not isinstance(names, (list, tuple)):
                    continue
                # The first directory of the namespace package nvidia.<module>.
                directory = next((os.path.join(s, "nvidia", *module.split("."), "lib") for s in sites
                                  if os.path.isdir(os.path.join(s, "nvidia", *module.split(".")))), None)
                for name in names:
                    if directory and isinstance(name, str) and name in (listing(directory) or ()):
                        out.preloads.append(Preload("jax", f"{rel} _load_nvidia_libraries",
                                                    "JAX's CUDA plugin initialization", "jax_plugins", None,
                                                    os.path.join(directory, name)))
