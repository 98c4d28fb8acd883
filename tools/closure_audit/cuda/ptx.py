"""What a driver compiles: the PTX ISA version each CUDA release introduced
(NVIDIA's PTX ISA release notes, "PTX ISA release history"), and the CUDA
version of a driver given as `13.0` or as its own version `580.65.06`.

A driver JIT-compiles PTX of an ISA version up to its own CUDA release's:
PTX `.version 9.0` needs a CUDA 13.0 driver, and an older one refuses it
(CUDA_ERROR_UNSUPPORTED_PTX_VERSION). A fat binary's PTX entry carries that
version in its header (cuobjdump's `code version`).
"""

from __future__ import annotations

import re

from .driver import TOOLKIT_DRIVER, parse_version

# PTX ISA version -> the first CUDA release whose driver compiles it.
PTX_ISA_CUDA = {
    (6, 0): (9, 0), (6, 1): (9, 1), (6, 2): (9, 2), (6, 3): (10, 0), (6, 4): (10, 1), (6, 5): (10, 2),
    (7, 0): (11, 0), (7, 1): (11, 1), (7, 2): (11, 2), (7, 3): (11, 3), (7, 4): (11, 4), (7, 5): (11, 5),
    (7, 6): (11, 6), (7, 7): (11, 7), (7, 8): (11, 8),
    (8, 0): (12, 0), (8, 1): (12, 1), (8, 2): (12, 2), (8, 3): (12, 3), (8, 4): (12, 4), (8, 5): (12, 5),
    (8, 6): (12, 7), (8, 7): (12, 8), (8, 8): (12, 9),
    (9, 0): (13, 0), (9, 1): (13, 1),
}


def newest_isa(cuda: tuple[int, int]) -> tuple[int, int]:
    """The newest PTX ISA a driver of CUDA release `cuda` compiles (one
    below every listed ISA: (0, 0))."""
    return max((isa for isa, need in PTX_ISA_CUDA.items() if need <= cuda), default=(0, 0))


def cuda_of_driver(version: tuple[int, ...]) -> tuple[int, int] | None:
    """The CUDA release a driver of this version supports: the newest whose
    toolkit's own minimum driver it meets (release notes, Table 3)."""
    fit = [cuda for cuda, need in TOOLKIT_DRIVER.items() if version >= parse_version(need)]
    return max(fit, default=None)


def parse_driver(text: str) -> tuple[int, int]:
    """`13.0` (a CUDA version) or `580.65.06` (a driver's own version) as the
    CUDA release it supports. ValueError with the reason otherwise."""
    value = parse_version(text)
    if value is None or not re.fullmatch(r"[0-9.]+", text.strip()):
        raise ValueError(f"not a driver version: {text!r} (write a CUDA version such as 13.0, or a driver "
                         f"version such as 580.65.06)")
    if value[0] < 100:
        if len(value) > 2:
            raise ValueError(f"not a CUDA version: {text!r} (write 13.0)")
        return value[0], value[1] if len(value) > 1 else 0
    cuda = cuda_of_driver(value)
    if cuda is None:
        raise ValueError(f"driver {text} is older than any CUDA 12 or 13 driver this tool knows "
                         f"(the oldest: {min(TOOLKIT_DRIVER.values(), key=parse_version)})")
    return cuda
