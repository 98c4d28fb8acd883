"""GPU code objects and the GPUs they run on.

Names: `sm_86` (a cubin: machine code), `compute_86` (PTX, compiled by the
driver for the GPU at hand), `lto_90` (LTO IR, linked at build time only), each
with an optional `a` (architecture-specific) or `f` (family-specific) suffix.

What runs where (NVIDIA's compatibility rules):
- a cubin `sm_XY` runs on capabilities X.Z with Z >= Y (same major);
- `sm_XYa` runs on X.Y only;
- `sm_XYf` runs on the capabilities of X.Y's family at or above X.Y
  (sm_100f: 10.0 and 10.3; the families are in lib/data/cuda-capabilities.json);
- PTX `compute_XY` compiles for any capability >= X.Y; `compute_XYa` and
  `compute_XYf` follow the cubin rules of their suffix.
"""

from __future__ import annotations

import re
from collections import namedtuple

_NAME = re.compile(r"^(sm|compute|lto)_(\d+)(\d)([af]?)$")


class Code(namedtuple("Code", "kind major minor variant", defaults=("",))):
    """One code object's target: kind "sm", "compute" or "lto", the
    capability's major and minor, and the variant "", "a" or "f". Ordered
    field by field."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.major}{self.minor}{self.variant}"

    @property
    def capability(self) -> str:
        return f"{self.major}.{self.minor}{self.variant}"


def parse_code(name: str) -> Code | None:
    m = _NAME.match(name)
    if m is None:
        return None
    return Code(m[1], int(m[2]), int(m[3]), m[4])


def parse_capability(text: str) -> tuple[int, int, str]:
    """'8.6' -> (8, 6, ''); '10.0f' -> (10, 0, 'f'). ValueError otherwise."""
    m = re.fullmatch(r"(\d+)\.(\d+)([af]?)", text.strip())
    if m is None:
        raise ValueError(f"not a CUDA capability: {text!r} (write 8.6, 9.0a or 10.0f)")
    return int(m[1]), int(m[2]), m[3]


def capability_table() -> dict:
    """lib/data/cuda-capabilities.json's capabilities."""
    from .data import table

    return table("cuda-capabilities.json")["capabilities"]


def family(major: int, minor: int) -> str:
    """The family a capability belongs to (itself when the table has none)."""
    entry = capability_table().get(f"{major}.{minor}", {})
    return entry.get("family", f"{major}.{minor}")


def runs_on(code: Code, device: tuple[int, int]) -> bool:
    """Whether `code` can run on a GPU of capability `device` (PTX: after JIT)."""
    if code.kind == "lto":
        return False  # link-time IR: never loaded by the driver
    dmajor, dminor = device
    if code.variant == "a":
        return (code.major, code.minor) == device
    if code.variant == "f":
        return family(code.major, code.minor) == family(dmajor, dminor) and (code.major, code.minor) <= device
    if code.kind == "compute":
        return (code.major, code.minor) <= device
    return code.major == dmajor and code.minor <= dminor


def covers(codes: list[Code], device: tuple[int, int]) -> list[Code]:
    """The codes that can run on `device`, best first: cubins before PTX, newer
    before older, the most specific (a, then f) first."""
    fit = [c for c in codes if runs_on(c, device)]
    return sorted(fit, key=lambda c: (c.kind != "sm", -c.major, -c.minor, "afx".index(c.variant or "x")))


def serves(code: Code, device: tuple[int, int]) -> bool:
    """Whether `code` is of use on `device`: a cubin that runs on it, PTX the
    driver compiles for it, or LTO IR that nvJitLink links for it at run time
    (cuFFT and cuSPARSE do), which follows the PTX rules."""
    if code.kind == "lto":
        return runs_on(Code("compute", code.major, code.minor, code.variant), device)
    return runs_on(code, device)
