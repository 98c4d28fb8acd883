"""NAR archives, read as a stream: decompress, hash and walk in one pass,
in constant memory, nothing written to disk.

The format (Nix's `nix-store --dump`): a sequence of strings, each a 64-bit
little-endian length, the bytes, and zero padding to a multiple of 8.

  nar       = "nix-archive-1" node
  node      = "(" "type" ( regular | symlink | directory ) ")"
  regular   = "regular" [ "executable" "" ] "contents" <bytes>
  symlink   = "symlink" "target" <bytes>
  directory = "directory" { "entry" "(" "name" <bytes> "node" node ")" }

Entry names are strictly increasing, never empty, ".", ".." or holding "/"
or NUL. Anything else, a stream cut short, or bytes after the end is a
NarError: a damaged archive is refused, never half read.
"""

from __future__ import annotations

import bz2
import hashlib
import lzma
import os
import struct
from dataclasses import KW_ONLY, dataclass
from typing import Iterator

CHUNK = 1 << 20  # file contents are handed out in pieces of at most this size
MAX_DEPTH = 256
_MAX_STRING = 1 << 16  # names, targets and keywords; contents are streamed instead


class NarError(Exception):
    """A NAR that cannot be read; the message says why."""


def decompressed(raw, compression: str):
    """A binary reader of the NAR inside `raw`, a binary stream compressed
    with `compression` (xz, zstd, bzip2 or none)."""
    if compression == "none":
        return raw
    if compression == "xz":
        return lzma.LZMAFile(raw, "rb")
    if compression == "bzip2":
        return bz2.BZ2File(raw, "rb")
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)
    raise NarError(f"unsupported compression '{compression}'")


class _Source:
    """Exact reads from a decompressing reader, with the SHA-256 and byte
    count of everything read, and decompression faults as NarError."""

    def __init__(self, reader):
        self.reader = reader
        self.sha256 = hashlib.sha256()
        self.size = 0

    def _raw(self, n: int) -> bytes:
        try:
            return self.reader.read(n)
        except (lzma.LZMAError, EOFError) as exc:
            raise NarError(f"damaged compression: {exc}") from None
        except OSError as exc:  # bz2 reports bad data as OSError
            raise NarError(f"damaged compression: {exc}") from None
        except Exception as exc:
            if type(exc).__module__.startswith("zstandard"):
                raise NarError(f"damaged compression: {exc}") from None
            raise

    def read(self, n: int) -> bytes:
        parts = []
        left = n
        while left:
            piece = self._raw(min(left, CHUNK))
            if not piece:
                raise NarError(f"truncated: the archive ends after {self.size} bytes")
            parts.append(piece)
            left -= len(piece)
            self.size += len(piece)
            self.sha256.update(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def at_end(self) -> bool:
        return not self._raw(1)


@dataclass
class Entry:
    path: str  # relative to the archive's root, "" for the root itself
    type: str  # "regular", "symlink" or "directory"
    _: KW_ONLY
    executable: bool = False
    size: int = 0
    target: bytes | None = None  # a symlink's target
    _reader: "NarReader | None" = None

    def chunks(self) -> Iterator[bytes]:
        """The contents of a regular file, in pieces; readable once, and only
        before the walk moves on (what is left unread is skipped then)."""
        if self._reader is None:
            return iter(())
        return self._reader._contents(self)


class NarReader:
    def __init__(self, reader):
        self.source = _Source(reader)
        self._left = 0  # contents of the current file not yet read

    # -- strings -----------------------------------------------------------------

    def _u64(self) -> int:
        return struct.unpack("<Q", self.source.read(8))[0]

    def _padding(self, n: int) -> None:
        pad = (-n) % 8
        if pad and self.source.read(pad) != b"\0" * pad:
            raise NarError("non-zero padding")

    def _string(self) -> bytes:
        n = self._u64()
        if n > _MAX_STRING:
            raise NarError(f"a string of {n} bytes where a name or keyword belongs")
        s = self.source.read(n) if n else b""
        self._padding(n)
        return s

    def _expect(self, word: bytes) -> None:
        got = self._string()
        if got != word:
            raise NarError(f"expected '{word.decode()}', found {got[:40]!r}")

    # -- the walk -------------------------------------------------------------------

    def entries(self) -> Iterator[Entry]:
        """Every node of the archive, a directory before what it holds,
        entries in the archive's (sorted) order."""
        self._expect(b"nix-archive-1")
        yield from self._node("", 0)
        self._finish()
        if not self.source.at_end():
            raise NarError("bytes after the end of the archive")

    def _node(self, path: str, depth: int) -> Iterator[Entry]:
        if depth > MAX_DEPTH:
            raise NarError(f"directories nested deeper than {MAX_DEPTH}")
        self._expect(b"(")
        self._expect(b"type")
        kind = self._string()
        if kind == b"regular":
            word = self._string()
            executable = word == b"executable"
            if executable:
                self._expect(b"")
                word = self._string()
            if word != b"contents":
                raise NarError(f"expected 'contents', found {word[:40]!r}")
            size = self._u64()
            self._left = size
            yield Entry(path, "regular", executable=executable, size=size, _reader=self)
            self._finish()
            self._padding(size)
            self._expect(b")")
        elif kind == b"symlink":
            self._expect(b"target")
            target = self._string()
            if not target:
                raise NarError(f"the symlink {path or '.'} has an empty target")
            self._expect(b")")
            yield Entry(path, "symlink", target=target)
        elif kind == b"directory":
            yield Entry(path, "directory")
            previous = None
            while True:
                word = self._string()
                if word == b")":
                    break
                if word != b"entry":
                    raise NarError(f"expected 'entry' or ')', found {word[:40]!r}")
                self._expect(b"(")
                self._expect(b"name")
                name = self._string()
                if not name or name in (b".", b"..") or b"/" in name or b"\0" in name:
                    raise NarError(f"invalid entry name {name!r} in {path or '.'}")
                if previous is not None and name <= previous:
                    raise NarError(f"entries of {path or '.'} are not sorted")
                previous = name
                self._expect(b"node")
                yield from self._node(f"{path}/{os.fsdecode(name)}" if path else os.fsdecode(name), depth + 1)
                self._expect(b")")
        else:
            raise NarError(f"unknown node type {kind[:40]!r}")

    def _contents(self, entry: Entry) -> Iterator[bytes]:
        while self._left:
            piece = self.source.read(min(self._left, CHUNK))
            self._left -= len(piece)
            yield piece

    def _finish(self) -> None:
        """Skip what the caller left unread of the current file."""
        while self._left:
            n = min(self._left, CHUNK)
            self.source.read(n)
            self._left -= n

    def check(self, nar_hash: bytes, nar_size: int) -> str | None:
        """After the walk: None when the archive is the one the narinfo
        describes, else why not."""
        if self.source.size != nar_size:
            return f"it is {self.source.size} bytes, the narinfo says {nar_size}"
        if self.source.sha256.digest() != nar_hash:
            return "its hash differs from the narinfo's NarHash"
        return None

