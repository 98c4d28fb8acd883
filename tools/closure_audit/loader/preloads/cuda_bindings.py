"""NVIDIA's cuda-bindings (12.9 and later, 13.x): its wrappers in
cuda/bindings/_internal/ (nvrtc, nvjitlink, nvvm, nvfatbin, cufile, ...)
load nothing at import. At the first call into one, each symbol is looked
up with dlsym(RTLD_DEFAULT), so a copy already loaded globally answers,
and otherwise `load_nvidia_dynamic_lib(NAME)` of cuda-pathfinder loads the
library: NVRTC (with its builtins, where pathfinder preloads them) and
nvJitLink are mapped in a fresh process that never touches a GPU.

Read from the files: a wrapper is an extension module of that directory
whose name is a pathfinder catalog entry's (case aside: nvjitlink is
nvJitLink) and whose bytes name `load_nvidia_dynamic_lib` (the driver's
and the runtime's wrappers dlopen by name, without pathfinder, and are not
catalog entries). The load is modelled before the wrapper's import, as
what the process has mapped once it is first used; where the site
directories hold no file of it, cuda-pathfinder's host fallbacks
(Pathfinder.plan). cuda-core's Program and Linker reach these wrappers
through a probe call, and take a library pathfinder finds nowhere as absent.
"""

from __future__ import annotations

import mmap
import os
import re
import zlib

from .common import Listing, Preload, Preloads
from .pathfinder import Pathfinder

INTERNAL = "cuda/bindings/_internal"
_MODULE = re.compile(r"^([A-Za-z0-9_]+)\.(?:cpython-[^.]*|abi3)\.so$")


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if listing(os.path.join(s, INTERNAL))), None)
    if site is None:
        return
    finder = Pathfinder.read(sites, out.notes)
    if finder is None:
        return
    names = {n.lower(): n for n in finder.catalog}
    directory = os.path.join(site, INTERNAL)
    for file in sorted(listing(directory) or ()):
        m = _MODULE.match(file)
        name = names.get(m[1].lower()) if m else None
        if name is None or not _calls_pathfinder(os.path.join(directory, file)):
            continue
        source = f"{finder.source}, called from {INTERNAL}/{file}"
        trigger = f"the first call into cuda.bindings' {m[1]}"
        for path, unless, along, host in finder.plan(name, listing):
            out.preloads.append(Preload("cuda-pathfinder", source, trigger, "cuda", f"{INTERNAL}/{m[1]}", path,
                                        unless, along=along, host=host))


def _calls_pathfinder(path: str) -> bool:
    """Whether the module's bytes name load_nvidia_dynamic_lib, as a plain
    string or inside a zlib stream: Cython 3.1 and later (cuda-bindings 13.5)
    keep a module's string constants compressed."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(NAME) >= 0 or any(NAME in text for text in _zlib_streams(data))
    except (OSError, ValueError):
        return False


NAME = b"load_nvidia_dynamic_lib"
_ZLIB = re.compile(rb"\x78[\x01\x5e\x9c\xda]")


def _zlib_streams(data):
    """The text of each zlib stream of the bytes (a header that happens to
    start no stream is passed over)."""
    view = memoryview(data)
    try:
        for m in _ZLIB.finditer(data):
            d, out, at = zlib.decompressobj(), [], m.start()
            try:  # a chunk at a time: most false headers fail within the first
                while not d.eof and at < len(data) and sum(map(len, out)) < 1 << 24:
                    out.append(d.decompress(view[at:at + (1 << 16)]))
                    at += 1 << 16
            except zlib.error:
                continue
            if d.eof:
                yield b"".join(out)
    finally:
        view.release()
