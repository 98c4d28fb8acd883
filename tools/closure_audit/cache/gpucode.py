"""The GPU code of store paths, for `why-build --gpu`: a path valid in the
local store is read where it is; any other is streamed out of a binary
cache's NAR (nar.py), nothing realised in the store.

A NAR is not downloaded when the cache's listing of it (`<hash>.ls`, what
Nix writes with `write-nar-listing=true`) shows no file that could be loaded
as code: GPU code runs from shared objects and executables, so a path none
of whose regular files is executable or named `*.so*` holds none that runs.
Without a listing the NAR is streamed, and only its ELF files are kept, one
at a time, in a temporary file the fat binary reader (elf/fatbin.py) reads;
every other member goes by unread but for its first bytes.

Each ELF file with GPU code (or a fat binary that cannot be read) is handed
to `visit(name, file, code)` while `file` exists: `name` is its path in the
store, `code` what elf/fatbin.py read of it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field

from ..elf.fatbin import read_files
from ..errors import ClosureError
from ..nix.storepath import hash_part
from .binary import BinaryCache
from .nar import NarReader, decompressed
from .transport import FetchError, NotFound

ELF_MAGIC = b"\x7fELF"
_LOADABLE = re.compile(r"\.so(\.|$)")
_CUDART = re.compile(r"libcudart\.so\.(\d+)$")


@dataclass
class PathCode:
    """What reading one store path found besides its GPU code."""

    path: str
    how: str  # "local", "streamed", or "listing" (the listing shows nothing loadable: not downloaded)
    runtimes: set[int] = field(default_factory=set)  # majors of the libcudart.so.N it holds
    streamed: int = 0  # NAR bytes read from the cache
    gpu_files: int = 0


def loadable(name: str, executable: bool) -> bool:
    """Whether a file of this name could be loaded as code (GPU code runs
    only from those)."""
    return executable or _LOADABLE.search(name) is not None


def _runtime(name: str, found: set[int]) -> None:
    m = _CUDART.search(name)
    if m:
        found.add(int(m[1]))


def read_local(path: str, visit) -> PathCode:
    """The GPU code of a path in the local store, read in place."""
    out = PathCode(path, "local")
    elf = []
    for top, dirs, files in os.walk(path) if os.path.isdir(path) else [(os.path.dirname(path), [], [
            os.path.basename(path)])]:
        dirs.sort()
        for name in sorted(files):
            _runtime(name, out.runtimes)
            full = os.path.join(top, name)
            if os.path.islink(full):
                continue
            try:
                with open(full, "rb") as f:
                    if f.read(4) == ELF_MAGIC:
                        elf.append(full)
            except OSError as exc:
                raise ClosureError(f"{full}: cannot read: {exc.strerror}") from None
    for full, code in read_files(elf, False, workers=1).items():
        if code.entries or code.problems:
            out.gpu_files += 1
            visit(full, full, code)
    return out


def listing_loadable(data: bytes) -> tuple[bool, set[int]] | None:
    """From a NAR listing: whether any regular file could be loaded as code,
    and the CUDA runtimes it names; None when the listing cannot be read."""
    try:
        root = json.loads(data)["root"]
    except (ValueError, KeyError, TypeError):
        return None
    runtimes: set[int] = set()
    found = False
    todo = [("", root)]
    while todo:
        name, node = todo.pop()
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            return None
        _runtime(name, runtimes)
        if node["type"] == "directory":
            entries = node.get("entries", {})
            if not isinstance(entries, dict):
                return None
            todo.extend(entries.items())
        elif node["type"] == "regular" and loadable(name, bool(node.get("executable"))):
            found = True
    return found, runtimes


def listings(wanted: list[tuple[BinaryCache, str]]) -> dict[str, bytes | None]:
    """The NAR listing of each (cache, path), None where the cache has none
    or cannot give it (the listing only spares a download: without it, the
    NAR is read); fetched concurrently on one event loop."""
    from .flight import InFlight, drive

    async def one(cache: BinaryCache, path: str) -> bytes | None:
        try:
            return await cache.transport.aget(f"{hash_part(path)}.ls")
        except (NotFound, FetchError):
            return None

    async def fetch_all():
        async with InFlight() as flight:
            for cache, path in wanted:
                flight.start(path, one(cache, path))
            return {path: answer async for path, answer in flight}

    return drive(fetch_all(), list({id(c.transport): c.transport for c, _ in wanted}.values())) if wanted else {}


def read_cached(cache: BinaryCache, path: str, info, visit, listing: bytes | None) -> PathCode:
    """The GPU code of a path in a binary cache, given its NAR listing (or
    None); a fault is a one-line ClosureError naming the path."""
    judged = None if listing is None else listing_loadable(listing)
    if judged is not None and not judged[0]:
        return PathCode(path, "listing", judged[1])
    with cache.nar_faults(path, info):
        return _stream(cache, path, info, visit)


def _stream(cache: BinaryCache, path: str, info, visit) -> PathCode:
    out = PathCode(path, "streamed")
    with tempfile.TemporaryDirectory(prefix="closure-audit-gpu-") as tmp, cache.transport.open(info.url) as raw:
        reader = NarReader(decompressed(raw, info.compression))
        for entry in reader.entries():
            _runtime(entry.path, out.runtimes)
            if entry.type != "regular" or entry.size < len(ELF_MAGIC):
                continue
            chunks = entry.chunks()
            first = next(chunks, b"")
            if not first.startswith(ELF_MAGIC):
                continue  # the rest of it is skipped by the walk
            spool = os.path.join(tmp, "member")
            with open(spool, "wb") as f:
                f.write(first)
                for piece in chunks:
                    f.write(piece)
            code = read_files([spool], False, workers=1)[spool]
            if code.entries or code.problems:
                out.gpu_files += 1
                visit(f"{path}/{entry.path}" if entry.path else path, spool, code)
            os.unlink(spool)
        out.streamed = reader.source.size
        why = reader.check(info.nar_hash.digest, info.nar_size)
    if why is not None:
        raise ClosureError(f"{path}: its NAR {cache.url}/{info.url} is not the one its narinfo describes: {why}")
    return out
