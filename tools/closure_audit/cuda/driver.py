"""Driver versions and what a CUDA runtime needs of them: NVIDIA's release
notes as data (docs/commands/doctor.md#minimum-driver-versions).

Two minimums per CUDA release:
- the toolkit's own driver (Table 3 of the release notes, "CUDA Toolkit and
  Corresponding Driver Versions", Linux x86_64): everything works;
- the major release's minor-version-compatibility driver (Table 2): the
  runtime starts and runs, but PTX newer than the driver cannot be
  JIT-compiled (CUDA_ERROR_UNSUPPORTED_PTX_VERSION) and the newest APIs fail.
Below that, nothing runs. cuda_compat (forward compatibility) lets a newer
user-space driver run on an older kernel module of a supported branch, on
data-center GPUs and Jetson only.
"""

from __future__ import annotations

import re

# CUDA release -> the toolkit's own minimum driver (Linux x86_64).
TOOLKIT_DRIVER = {
    (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03", (12, 3): "545.23.06",
    (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03", (12, 8): "570.26",
    (12, 9): "575.51.03", (13, 0): "580.65.06",
}
# CUDA major -> the minimum driver of minor version compatibility.
MINOR_COMPAT_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def parse_version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def at_least(have: str, need: str) -> bool:
    return parse_version(have) >= parse_version(need)


def needs(runtime: tuple[int, int]) -> tuple[str | None, str | None]:
    """(the toolkit's own minimum driver, the minor-compatibility minimum) of a
    CUDA release; an unlisted minor release takes the nearest listed one below."""
    major, minor = runtime
    listed = [k for k in TOOLKIT_DRIVER if k[0] == major and k[1] <= minor]
    own = TOOLKIT_DRIVER[max(listed)] if listed else None
    return own, MINOR_COMPAT_DRIVER.get(major)


def library_version_from_name(name: str) -> str | None:
    """A driver library's version from its file name: libcuda.so.550.54.14
    (every driver installer names the real file so). WSL's libcuda.so.1.1 has none."""
    m = re.fullmatch(r"lib[\w-]+\.so\.(\d{3,}\.\d+(?:\.\d+)?)", name)
    return m[1] if m else None


_KERNEL = re.compile(r"Kernel Module(?: for \S+)?\s+(\d{3,}\.\d+(?:\.\d+)?)")


def kernel_module_version(text: str | None) -> str | None:
    """The version in /proc/driver/nvidia/version (proprietary or open module)."""
    m = _KERNEL.search(text or "")
    return m[1] if m else None
