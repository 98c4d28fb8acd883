"""Triton's profiler (proton): the CUPTI bundled with Triton, by path; and
how its driver finds libcuda.so.1 (`ldconfig -p`, which NixOS cannot answer)."""

from __future__ import annotations

import ast
import os

from .common import Listing, Preload, Preloads, function, parse


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    """Triton's profiler (proton) opens the CUPTI bundled with Triton by path
    (knobs.proton.cupti_lib_dir, TRITON_CUPTI_LIB_PATH), not by name."""
    for site in sites:
        knobs = os.path.join(site, "triton", "knobs.py")
        directory = os.path.join(site, "triton", "backends", "nvidia", "lib", "cupti")
        try:
            with open(knobs, encoding="utf-8", errors="replace") as f:
                says = "TRITON_CUPTI_LIB_PATH" in f.read()
        except OSError:
            continue
        if says and "libcupti.so" in (listing(directory) or ()):
            out.preloads.append(Preload("triton", "triton/knobs.py cupti_lib_dir", "Triton's profiler (proton)",
                                        "triton", None, os.path.join(directory, "libcupti.so")))


def libcuda_search(sites: list[str]) -> list[tuple[str, str | None]]:
    """Triton's `libcuda_dirs()` (triton/backends/nvidia/driver.py) that runs
    `/sbin/ldconfig -p` to find libcuda.so.1: (the file, the variable that
    skips it, TRITON_LIBCUDA_PATH where driver.py or knobs.py names it)."""
    out = []
    for site in sites:
        driver = os.path.join(site, "triton", "backends", "nvidia", "driver.py")
        tree = parse(driver)
        fn = function(tree, "libcuda_dirs") if tree is not None else None
        if fn is None or not any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "ldconfig" in n.value
                                 for n in ast.walk(fn)):
            continue
        variable = None
        for path in (driver, os.path.join(site, "triton", "knobs.py")):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    if "TRITON_LIBCUDA_PATH" in f.read():
                        variable = "TRITON_LIBCUDA_PATH"
                        break
            except OSError:
                continue
        out.append((driver, variable))
    return out
