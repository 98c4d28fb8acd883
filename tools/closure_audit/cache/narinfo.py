"""The `.narinfo` files of a Nix binary cache: parse them strictly, and
compute the fingerprint their signatures cover.

A narinfo is `Key: value` lines, each ending in a newline:

  StorePath: /nix/store/<hash>-<name>
  URL: nar/<file hash>.nar.xz
  Compression: xz
  FileHash: sha256:<base32>        (optional)
  FileSize: <bytes>                (optional)
  NarHash: sha256:<base32>
  NarSize: <bytes>
  References: <base name> <base name> ...
  Deriver: <base name>.drv         (optional)
  Sig: <key name>:<base64>         (optional, repeatable)
  CA: ...                          (optional)

Anything missing, duplicated or malformed is an error, never a guess: a
truncated file usually still parses line by line, so a file that does not end
in a newline, a hash of the wrong length or a size that is not a number is
refused too.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from ..nix.storepath import HASH_CHARS, is_store_basename

_B32_INDEX = {c: i for i, c in enumerate(HASH_CHARS)}
_B32_DIGITS = re.compile(f"[{HASH_CHARS}]*")
_B32_TO_INT = str.maketrans(HASH_CHARS, "0123456789abcdefghijklmnopqrstuv")  # as int(_, 32) reads digits
_HASH_SIZES = {"md5": 16, "sha1": 20, "sha256": 32, "sha512": 64}
_COMPRESSIONS = ("xz", "zstd", "bzip2", "none")
_REQUIRED = ("StorePath", "URL", "NarHash", "NarSize", "References")
_SINGLE = {"StorePath", "URL", "Compression", "FileHash", "FileSize", "NarHash", "NarSize", "References",
           "Deriver", "System", "CA"}
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class NarInfoError(Exception):
    """A narinfo that cannot be used; the message says why (without the path)."""


def to_base32(digest: bytes) -> str:
    """Nix's base-32: the digest read as a little-endian number, written most
    significant digit first in the alphabet without e, o, t, u."""
    length = (len(digest) * 8 + 4) // 5
    value = int.from_bytes(digest, "little")
    return "".join(HASH_CHARS[(value >> (5 * i)) & 31] for i in reversed(range(length)))


def from_base32(text: str, size: int) -> bytes:
    if len(text) != (size * 8 + 4) // 5:
        raise ValueError(f"a base-32 hash of {size} bytes has {(size * 8 + 4) // 5} digits, not {len(text)}")
    if not _B32_DIGITS.fullmatch(text):
        bad = next(c for c in text if c not in _B32_INDEX)
        raise ValueError(f"'{bad}' is not a base-32 digit")
    value = int(text.translate(_B32_TO_INT), 32)  # in C: a narinfo holds two of them, a walk thousands
    if value >> (size * 8):
        raise ValueError("base-32 hash out of range")
    return value.to_bytes(size, "little")


@dataclass(frozen=True)
class Hash:
    algorithm: str
    digest: bytes

    def base32(self) -> str:
        """`sha256:<base32>`, the form fingerprints and narinfos use."""
        return f"{self.algorithm}:{to_base32(self.digest)}"


def parse_hash(text: str) -> Hash:
    """`algo:<base32|base16|base64>` or SRI `algo-<base64>`."""
    m = re.match(r"^(md5|sha1|sha256|sha512)([:-])(.+)$", text)
    if m is None:
        raise ValueError(f"'{text}' is not a hash (algo:digest)")
    algo, sep, body = m.groups()
    size = _HASH_SIZES[algo]
    if sep == ":" and len(body) == (size * 8 + 4) // 5:
        return Hash(algo, from_base32(body, size))
    if sep == ":" and len(body) == 2 * size:
        try:
            return Hash(algo, bytes.fromhex(body))
        except ValueError:
            raise ValueError(f"'{text}' is not a base-16 hash") from None
    try:
        digest = base64.b64decode(body, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != size:
        raise ValueError(f"'{text}' has a digest of the wrong length for {algo}")
    return Hash(algo, digest)


@dataclass(frozen=True, kw_only=True)
class NarInfo:
    store_path: str
    url: str
    compression: str
    nar_hash: Hash
    nar_size: int
    references: tuple[str, ...]  # full store paths, as written (order kept)
    deriver: str | None
    sigs: tuple[str, ...]
    file_hash: Hash | None = None
    file_size: int | None = None

    def fingerprint(self) -> str:
        """What a signature signs: `1;<path>;<NarHash base32>;<NarSize>;<sorted
        full reference paths, comma-separated>`."""
        return ";".join(("1", self.store_path, self.nar_hash.base32(), str(self.nar_size),
                         ",".join(sorted(self.references))))


def parse_narinfo(text: str, store_dir: str) -> NarInfo:
    """Parse one narinfo; raises NarInfoError with a reason."""
    if not text.endswith("\n"):
        raise NarInfoError("truncated (the last line has no newline)")
    fields: dict[str, str] = {}
    sigs: list[str] = []
    for number, line in enumerate(text[:-1].split("\n"), 1):
        key, sep, value = line.partition(": ")
        if not sep:
            if line.endswith(":") and _KEY.match(line[:-1]):  # `References:` with nothing after it
                key, value = line[:-1], ""
            else:
                raise NarInfoError(f"line {number} is not 'Key: value'")
        if not _KEY.match(key):
            raise NarInfoError(f"line {number} has no key")
        if key == "Sig":
            sigs.append(value)
        elif key in fields and key in _SINGLE:
            raise NarInfoError(f"{key} appears twice")
        else:
            fields[key] = value
    for key in _REQUIRED:
        if key not in fields:
            raise NarInfoError(f"no {key} line")
    store_path = fields["StorePath"]
    if not _in_store(store_path, store_dir):
        raise NarInfoError(f"StorePath {store_path} is not a path in {store_dir}")
    compression = fields.get("Compression", "bzip2")  # Nix's default when the line is absent
    if compression not in _COMPRESSIONS:
        raise NarInfoError(f"unsupported Compression '{compression}' (supported: {', '.join(_COMPRESSIONS)})")
    url = fields["URL"]
    if not url or url.startswith("/") or ".." in url.split("/") or url.split() != [url]:  # no white space
        raise NarInfoError(f"URL '{url}' is not a path inside the cache")
    try:
        nar_hash = parse_hash(fields["NarHash"])
    except ValueError as exc:
        raise NarInfoError(f"NarHash: {exc}") from None
    if nar_hash.algorithm != "sha256":
        raise NarInfoError(f"NarHash is {nar_hash.algorithm}, not sha256")
    nar_size = _size(fields["NarSize"], "NarSize")
    references = []
    for ref in fields["References"].split(" ") if fields["References"] else ():
        if not is_store_basename(ref) or "/" in ref:
            raise NarInfoError(f"reference '{ref}' is not a store path name")
        references.append(f"{store_dir}/{ref}")
    deriver = fields.get("Deriver") or None
    if deriver is not None and deriver != "unknown-deriver" and not is_store_basename(deriver):
        raise NarInfoError(f"Deriver '{deriver}' is not a store path name")
    file_hash = None
    if "FileHash" in fields:
        try:
            file_hash = parse_hash(fields["FileHash"])
        except ValueError as exc:
            raise NarInfoError(f"FileHash: {exc}") from None
    file_size = _size(fields["FileSize"], "FileSize") if "FileSize" in fields else None
    for sig in sigs:
        name, sep, body = sig.partition(":")
        if not sep or not name or not body:
            raise NarInfoError(f"Sig '{sig}' is not NAME:BASE64")
    return NarInfo(store_path=store_path, url=url, compression=compression, nar_hash=nar_hash, nar_size=nar_size,
                   references=tuple(references), deriver=deriver, sigs=tuple(sigs), file_hash=file_hash,
                   file_size=file_size)


def _in_store(path: str, store_dir: str) -> bool:
    head, _, base = path.rpartition("/")
    return head == store_dir and is_store_basename(base)


def _size(text: str, what: str) -> int:
    if not text.isdigit():
        raise NarInfoError(f"{what} '{text}' is not a number")
    return int(text)
