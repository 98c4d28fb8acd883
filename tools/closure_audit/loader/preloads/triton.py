"""Triton's profiler (proton): the CUPTI bundled with Triton, by path."""

from __future__ import annotations

import os

from .common import Listing, Preload, Preloads

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
