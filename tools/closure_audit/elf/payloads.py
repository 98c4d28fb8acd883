"""What an entry of a fat binary holds: its payload, decompressed (zstd, or
NVIDIA's LZ, which is the LZ4 block format), and the kernels it defines.
Read only where a judgement asks (archs' unused-code verdicts, the kernels
without a cubin for a GPU): a listing (elf/fatbin.py) reads headers alone."""

from __future__ import annotations

import os
import re

from .fatbin import Entry, FatbinError
from .reader import InvalidElf, cubin_kernels

MAX_PAYLOAD = 1 << 30  # NVIDIA's largest payloads are tens of MB; a header claiming more is damaged
_PTX_ENTRY = re.compile(rb"\.entry\s+([^\s(]+)")


def payload(fd: int, e: Entry) -> bytes:
    """The payload of an entry, decompressed. Raises FatbinError."""
    raw = os.pread(fd, e.packed, e.offset + e.header)
    if len(raw) < e.packed:
        raise FatbinError(f"entry at offset {e.offset:#x}: the file ends inside its payload")
    size = e.uncompressed - e.header
    if size > MAX_PAYLOAD:
        raise FatbinError(f"entry at offset {e.offset:#x} claims {size} bytes uncompressed")
    if e.compression == "zstd":
        import zstandard

        try:  # a stream read stops at the size the header gives, whatever the frame claims
            with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
                raw = stream.read(size + 1)
        except zstandard.ZstdError as exc:
            raise FatbinError(f"entry at offset {e.offset:#x}: its zstd payload does not decompress ({exc})")
    elif e.compression == "lz":  # NVIDIA's LZ is the LZ4 block format
        import lz4.block

        try:
            raw = lz4.block.decompress(raw, uncompressed_size=size)
        except lz4.block.LZ4BlockError as exc:
            raise FatbinError(f"entry at offset {e.offset:#x}: its LZ payload does not decompress ({exc})")
    if len(raw) != size:
        raise FatbinError(f"entry at offset {e.offset:#x}: {len(raw)} bytes decompressed, not {size}")
    return raw


def kernels_of(path: str, entries: list[Entry]) -> frozenset[str] | None:
    """The kernels the entries of one file define together; None when the
    file or one entry cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        out: frozenset[str] = frozenset()
        for e in entries:
            found = kernels(fd, e)
            if found is None:
                return None
            out |= found
        return out
    finally:
        os.close(fd)


def kernels(fd: int, e: Entry) -> frozenset[str] | None:
    """The kernels an entry defines: a cubin's entry-point functions, PTX's
    `.entry` directives; None for LTO IR (not read) or an entry that cannot be
    read, which the judgement counts as holding kernels."""
    if e.kind == "lto":
        return None
    try:
        data = payload(fd, e)
        if e.kind == "ptx":
            return frozenset(os.fsdecode(m) for m in _PTX_ENTRY.findall(data))
        return frozenset(cubin_kernels(data, len(data)))
    except (FatbinError, InvalidElf):
        return None
