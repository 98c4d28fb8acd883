"""The GPU code in a store path's own ELF files, by code name (sm_86,
compute_90): read from the local store, or from its NAR streamed out of a
binary cache (survey --archs).

A NAR member is looked at as it goes by: an ELF file that holds a fatbin's
magic is spooled to an anonymous temporary file and read there by the same
reader `archs` uses (elf/fatbin.py), so nothing of the NAR but one such file
at a time is kept, and nothing is left on disk.
"""

from __future__ import annotations

import os
import stat
import tempfile

from ..elf.fatbin import MAGIC_BYTES, FileCode, read_file
from ..errors import ClosureError
from .binary import BinaryCache
from .nar import NarError, NarReader, decompressed

ELF_MAGIC = b"\x7fELF"


def add_code(totals: dict[str, int], code: FileCode) -> None:
    for e in code.entries:
        totals[e.code.name] = totals.get(e.code.name, 0) + e.stored


def local_code(path: str) -> dict[str, int]:
    """Bytes of GPU code per code name in the ELF files under `path` (a
    store path of the local store; symlinks are not followed: a link's
    target is another path's own file, or this one's, counted there)."""
    totals: dict[str, int] = {}
    files = [path] if os.path.isfile(path) and not os.path.islink(path) else []
    for top, dirs, names in os.walk(path):
        files.extend(os.path.join(top, n) for n in names)
    for f in files:
        try:
            st = os.lstat(f)
            if not stat.S_ISREG(st.st_mode) or st.st_size < 64:
                continue
            with open(f, "rb") as fh:
                if fh.read(4) != ELF_MAGIC:
                    continue
        except OSError as exc:
            raise ClosureError(f"{path}: cannot read {f}: {exc.strerror}") from None
        add_code(totals, read_file(f))
    return totals


def nar_code(cache: BinaryCache, path: str) -> dict[str, int]:
    """The same for `path` in the binary cache, from its NAR, checked against
    its narinfo's hash and size. Every fault is a one-line ClosureError."""
    info = cache.narinfo(path)
    with cache.nar_faults(path, info):
        return _streamed(cache, info)


def _streamed(cache: BinaryCache, info) -> dict[str, int]:
    totals: dict[str, int] = {}
    with cache.transport.open(info.url) as raw:
        reader = NarReader(decompressed(raw, info.compression))
        for entry in reader.entries():
            if entry.type != "regular":
                continue
            spool, held = None, b""
            try:
                for piece in entry.chunks():
                    if spool is None:
                        held += piece
                        if len(held) < 4:
                            continue
                        if held[:4] != ELF_MAGIC:
                            break  # not ELF: the rest of its bytes go by unread
                        spool = tempfile.TemporaryFile()
                        spool.write(held)
                    else:
                        spool.write(piece)
                if spool is not None:
                    spool.flush()
                    if _holds(spool, MAGIC_BYTES):
                        add_code(totals, read_file(f"/proc/self/fd/{spool.fileno()}"))
            finally:
                if spool is not None:
                    spool.close()
        problem = reader.check(info.nar_hash.digest, info.nar_size)
    if problem is not None:
        raise NarError(f"not the one its narinfo describes: {problem}")
    return totals


def _holds(spool, needle: bytes, block: int = 1 << 20) -> bool:
    spool.seek(0)
    tail = b""
    while True:
        piece = spool.read(block)
        if not piece:
            return False
        if needle in tail + piece:
            return True
        tail = piece[-(len(needle) - 1):]
