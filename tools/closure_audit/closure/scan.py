"""Read a `nix path-info --json` dump straight from its bytes into the
graph's arrays, without a Python object per reference: at a million paths
and nine million references, parsing the whole dump into dictionaries and
strings took longer and more memory than everything a command does after.

The bytes are scanned with numpy. Every string's place comes from the
quotes (a dump this reads has no backslash, so no escaped quote); the text
between the strings, every string cut down to `""`, is a small document
that orjson checks for JSON's syntax; the nesting and the keys come from
that skeleton. Store paths are interned once each (one Python string per
path); each reference is found by its path's hash part and then compared
with that path byte for byte, so a reference is resolved exactly as a
dictionary lookup of its text would.

The passes over the bytes and over the strings run in pieces on every
usable core: numpy lets go of the interpreter inside each piece, so two
cores read a dump in about two thirds of the time one takes.

`scan` answers None for anything it does not read itself: a dump that is
not ASCII or has escapes, a value of an unexpected type, a duplicate key, a
missing or unknown path, a size that is not a plain integer. The caller then
parses the dump as JSON (graph.py), which gives the same graph or the same
one-line error as ever: this is only a faster way to the same answer.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..util import usable_cores
from .heap import kept_heap
from .skeleton import CLASSES, CLOSE, IS_CLOSE, IS_OPEN, IS_SCALAR, IS_SPACE, OPEN, is_json

QUOTE, COLON = 34, 58
BLOCK = 1 << 24  # bytes compared at once when finding the quotes
PIECE = 1 << 20  # strings read at once where each needs several temporary arrays
SKELETON_PIECE = 1 << 16  # gaps between strings copied at once: a few MB of indices
MAX_DIGITS = 16  # sizes are below 2**53, which has 16 digits
THREADS = 8  # pieces at once, at most


def _pieces(fn, total: int, step: int) -> list:
    """fn(lo, hi) for each piece [lo, hi) of [0, total), `step` long, their
    results in order; the pieces run on every usable core."""
    spans = [(lo, min(lo + step, total)) for lo in range(0, total, step)]
    workers = min(len(spans), THREADS, usable_cores())
    if workers <= 1:
        return [fn(lo, hi) for lo, hi in spans]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda span: fn(*span), spans))


class _Bytes:
    """The dump (bytes, or a file mapped into memory) as a byte array, with
    8-byte words at any offset."""

    def __init__(self, data: bytes):
        self.data = data
        self.a = np.frombuffer(data, dtype=np.uint8)
        self._w = np.frombuffer(data, dtype="<u8", count=len(data) // 8)  # the aligned words, not a copy

    def words(self, at: np.ndarray) -> np.ndarray:
        """The little-endian 8-byte word starting at each offset of `at`
        (zeros past the end): two aligned words, shifted together; in pieces
        (temporaries the allocator reuses, not fresh pages for each)."""
        if at.size > PIECE:
            out = np.empty(at.size, dtype=np.uint64)
            flat = at.reshape(-1)
            for lo in range(0, len(flat), PIECE):
                out[lo:lo + PIECE] = self.words(flat[lo:lo + PIECE])
            return out.reshape(at.shape)
        last = len(self._w) - 1
        i = at >> 3
        shift = ((at & 7) << 3).astype(np.uint64)
        out = (self._w[np.minimum(i, last)] >> shift) | (self._w[np.minimum(i + 1, last)] << (np.uint64(64) - shift))
        flat, where = out.reshape(-1), at.reshape(-1)
        for k in np.flatnonzero(where + 16 > 8 * len(self._w)).tolist():  # the last few bytes: no word after them
            flat[k] = int.from_bytes(self.data[where[k]:where[k] + 8].ljust(8, b"\0"), "little")
        return out

    def equal(self, a: np.ndarray, b: np.ndarray, length: np.ndarray, block: int = 1 << 14) -> bool:
        """Whether the `length[i]` bytes at a[i] and b[i] are the same, for
        every i. Each string is read whole, as one row of bytes (b's strings
        lie anywhere in the dump: reading them a word at a time across all
        strings would fetch each one's memory again for every word), a block
        of strings at a time; the bytes past each string's end are masked off."""
        if len(a) > PIECE:  # a piece at a time: the sorted copies below stay small (300 MB whole at a million paths)
            return all(self.equal(a[lo:lo + PIECE], b[lo:lo + PIECE], length[lo:lo + PIECE], block)
                       for lo in range(0, len(a), PIECE))
        # Strings of about one width together: a block is as wide as its longest.
        by_width = np.argsort(np.minimum(length, 1 << 14).astype(np.int16), kind="stable")  # a radix sort
        a, b, length = a[by_width], b[by_width], length[by_width]

        def same(lo: int, hi: int) -> bool:
            n, x, y = length[lo:hi], a[lo:hi], b[lo:hi]
            width = -(-int(n.max(initial=0)) // 8) * 8
            end = len(self.a) - width
            near = (x > end) | (y > end)  # too close to the end for a whole row: compared one by one
            for i in np.flatnonzero(near).tolist():
                if self.data[x[i]:x[i] + n[i]] != self.data[y[i]:y[i] + n[i]]:
                    return False
            if width == 0 or near.all():
                return True
            n, x, y = n[~near], x[~near], y[~near]
            rows = np.lib.stride_tricks.as_strided(self.a, shape=(end + 1, width), strides=(1, 1))
            left = n[:, None] - 8 * np.arange(width // 8)[None, :]  # bytes of each string in each word
            mask = np.where(left >= 8, ~np.uint64(0),
                            (np.uint64(1) << (8 * np.clip(left, 0, 7)).astype(np.uint64)) - np.uint64(1))
            return not ((rows[x].view("<u8") ^ rows[y].view("<u8")) & mask).any()
        return all(_pieces(same, len(a), block))

    def texts(self, at: np.ndarray, length: np.ndarray) -> list[str]:
        """The strings (offset, length), decoded: each piece's strings copied
        together with their closing quotes, decoded at once and split at the
        quotes (no string has one), not one slice and decode for each."""
        out: list[str] = []
        for lo in range(0, len(at), SKELETON_PIECE):
            n = length[lo:lo + SKELETON_PIECE] + 1
            placed = np.cumsum(n) - n
            index = np.repeat(at[lo:lo + SKELETON_PIECE] - placed, n) + np.arange(int(placed[-1] + n[-1]))
            out += self.a[index].tobytes().decode().split('"')[:-1]
        return out

    def is_text(self, at: np.ndarray, length: np.ndarray, text: bytes) -> np.ndarray:
        """For each string (offset, length), whether it is `text`."""
        out = length == len(text)
        if len(text) < 8:  # one word, its bytes past the text masked off
            pad = int.from_bytes(text, "little")
            out[out] = (self.words(at[out]) & np.uint64((1 << (8 * len(text))) - 1)) == pad
            return out
        for k in range(0, len(text), 8):
            k = min(k, len(text) - 8)
            out[out] = self.words(at[out] + k) == int.from_bytes(text[k:k + 8], "little")
        return out


def _quotes(a: np.ndarray) -> tuple[np.ndarray, bool]:
    """Every quote's offset, and whether a control character (which JSON
    allows in a string only escaped) is inside a string: one pass over the
    bytes, a block at a time."""
    def block(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        hits = np.flatnonzero(a[lo:hi] <= QUOTE)
        chars = a[lo:hi][hits]
        return hits[chars == QUOTE] + lo, hits[chars < 0x20] + lo
    found = _pieces(block, len(a), BLOCK)
    q = np.concatenate([f[0] for f in found]) if found else np.zeros(0, dtype=np.int64)
    ctl = np.concatenate([f[1] for f in found]) if found else np.zeros(0, dtype=np.int64)
    return q, bool((np.searchsorted(q, ctl) % 2).any())


def _skeleton(a: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dump with every string's contents taken out (`"..."` -> `""`), and
    where each string's opening quote lands in it."""
    # Kept: from each closing quote to the next opening quote, both included;
    # gap i starts at the closing quote q[2i - 1] (the dump's start for i = 0).
    # No array of the starts: each is one more array as long as the strings.
    lengths = np.empty(len(q) // 2 + 1, dtype=np.int64)
    lengths[0] = q[0] + 1
    np.subtract(q[2::2], q[1:-1:2], out=lengths[1:-1])
    lengths[1:-1] += 1
    lengths[-1] = len(a) - q[-1]
    placed = np.cumsum(lengths)
    out = np.empty(int(placed[-1]), dtype=np.uint8)
    placed -= lengths
    del lengths

    def copy(lo: int, hi: int) -> None:  # in pieces: the index arrays stay small
        p = placed[lo:hi]
        n = np.diff(placed[lo:hi + 1]) if hi < len(placed) else np.append(np.diff(p), len(out) - p[-1])
        s = q[max(2 * lo - 1, 1):2 * hi - 1:2]
        if lo == 0:
            s = np.concatenate(([0], s))
        at = np.repeat(s - p, n) + np.arange(int(p[0]), int(p[-1] + n[-1]), dtype=np.int64)
        out[int(p[0]):int(p[-1] + n[-1])] = a[at]
    _pieces(copy, len(placed), SKELETON_PIECE)
    placed -= 1
    return out, placed[1:]


def scan(data, store: str):
    """(paths, nar sizes, Nix's closure sizes or -1, references: how many
    each path has and the referenced paths' indices, flattened), paths in
    the order the dump lists them; None where the dump is not one this reads.
    `data`: bytes, or a file mapped into memory."""
    if np.frombuffer(data, dtype=np.uint8).max(initial=0) >= 0x80 or data.find(b"\\") >= 0:
        return None
    with kept_heap():
        return _scan(data, store)


def _scan(data: bytes, store: str):
    buf = _Bytes(data)
    q, control = _quotes(buf.a)
    if control or len(q) % 2 or len(q) == 0:
        return None
    sk, sq = _skeleton(buf.a, q)
    cls = CLASSES[sk]
    brackets = np.flatnonzero(cls & (IS_OPEN | IS_CLOSE))
    opened = np.cumsum(np.where(cls[brackets] & IS_OPEN, 1, -1), dtype=np.int32)  # containers open after each
    if not is_json(sk, cls, brackets, opened):
        return None
    s_from = q[0::2] + 1
    s_len = q[1::2] - s_from
    del q  # a fifth of the dump's size in offsets, not needed again
    # Handed over in a dictionary the reader empties: what it frees is freed,
    # not held on to by this frame (each array as long as the strings).
    arrays = dict(sk=sk, sq=sq, s_from=s_from, s_len=s_len, cls=cls, brackets=brackets, opened=opened)
    del sk, sq, s_from, s_len, cls, brackets, opened
    return _read(buf, arrays, store)


def _read(buf: _Bytes, arrays: dict, store: str):
    """The entries, from the skeleton `sk` (a valid JSON text) where string i
    opens at sq[i] and holds the s_len[i] bytes at s_from[i] of the dump;
    `cls` is the class of each byte of the skeleton, `brackets` where its
    brackets are and `opened` how many containers are open after each.
    Taken out of `arrays`, so each is freed once read."""
    sk, sq, s_from, s_len = (arrays.pop(k) for k in ("sk", "sq", "s_from", "s_len"))
    cls, brackets, opened = (arrays.pop(k) for k in ("cls", "brackets", "opened"))

    def around(at):
        """Containers around each offset of `at` (a bracket's own not counted)."""
        out = np.empty(len(at), dtype=np.int32)

        def count(lo: int, hi: int) -> None:  # in pieces, as _Bytes.words reads
            k = np.searchsorted(brackets, at[lo:hi]) - 1
            out[lo:hi] = np.where(k >= 0, opened[np.maximum(k, 0)], 0)
        _pieces(count, len(at), PIECE)
        return out
    if (cls & IS_SPACE).any():  # spaces between tokens: the next byte that is not one
        solid = np.flatnonzero(~(cls & IS_SPACE).astype(bool))

        def skip(at):
            return solid[np.searchsorted(solid, at)]
    else:  # Nix's own output

        def skip(at):
            return at
    top = skip(np.zeros(1, dtype=np.int64))[0]
    if sk[top] not in OPEN:
        return None
    listed = sk[top] == OPEN[1]
    value = skip(sq + 2)  # the first byte after each string, spaces aside ...
    key = sk[value] == COLON
    value[key] = skip(value[key] + 1)  # ... and, in place, where a key's value starts
    value[~key] = len(sk) - 1
    depth = around(sq)

    if listed:
        elements = np.flatnonzero(cls & (IS_OPEN | IS_SCALAR))
        elements = elements[around(elements) == 1]
        if (depth == 1).any() or not (sk[elements] == OPEN[0]).all():  # every element an object
            return None
        entry_at = elements
    else:
        top = np.flatnonzero((depth == 1) & key)
        entry_at = value[top]
        if not (sk[entry_at] == OPEN[0]).all():  # every value an object
            return None
    n = len(entry_at)
    if n == 0:
        return None
    fields = np.flatnonzero((depth == 2) & key)
    owner = np.searchsorted(entry_at, sq[fields], side="right") - 1
    named = {}
    field_from, field_len = s_from[fields], s_len[fields]
    for name in (b"references", b"narSize", b"closureSize", b"storeDir", b"valid", b"path"):
        hit = buf.is_text(field_from, field_len, name)
        if (np.bincount(owner[hit], minlength=n) > 1).any():  # a key twice: JSON readers keep the last
            return None
        named[name] = (owner[hit], value[fields[hit]])
    del fields, owner, field_from, field_len, value, depth, key  # each as long as the strings: freed for what follows

    def string_value(name: bytes):
        who, at = named[name]
        if not (sk[at] == QUOTE).all():
            return None
        return who, np.searchsorted(sq, at)

    if listed:
        path = string_value(b"path")
        if path is None or len(path[0]) != n or not (sk[named[b"valid"][1]] != ord("f")).all():
            return None
        path = path[1][np.argsort(path[0])]
    else:
        path = top
    nar = _integers(sk, *named[b"narSize"], n, -2)
    closure = _integers(sk, *named[b"closureSize"], n, -1)
    store_dirs = string_value(b"storeDir")
    if nar is None or closure is None or store_dirs is None or (nar < 0).any():
        return None

    # References: arrays of strings alone.
    who, at = named[b"references"]
    if not (sk[at] == OPEN[1]).all():
        return None
    closing = brackets[sk[brackets] == CLOSE[1]]
    end = closing[np.searchsorted(closing, at)]
    inner = np.flatnonzero(cls & (IS_OPEN | IS_SCALAR))
    if (inner[np.minimum(np.searchsorted(inner, at + 1), len(inner) - 1)] < end).any():
        return None
    lo, hi = np.searchsorted(sq, at), np.searchsorted(sq, end)
    counts = np.zeros(n, dtype=np.int64)
    counts[who] = hi - lo
    # The arrays are disjoint and in the entries' order: their strings, in order.
    inside = np.zeros(len(sq) + 1, dtype=np.int8)
    inside[lo] += 1
    inside[hi] -= 1
    refs = np.flatnonzero(np.cumsum(inside[:-1], dtype=np.int8))
    # Only these strings are read from here on: the arrays over all of them
    # (and the skeleton's) are freed before the references are resolved.
    key_from, key_len = s_from[path], s_len[path]
    ref_from, ref_len = s_from[refs], s_len[refs]
    dir_from, dir_len = s_from[store_dirs[1]], s_len[store_dirs[1]]
    del s_from, s_len, refs, inside, closing, end, inner, lo, hi, sq, sk, cls, brackets, opened
    solid = None  # skip()'s index, where there are spaces
    flat = _resolve(buf, key_from, key_len, ref_from, ref_len, dir_from, dir_len, store)
    if flat is None:
        return None
    absolute = buf.data[key_from[0]] == ord("/")
    paths = buf.texts(key_from, key_len)
    if not absolute:
        paths = [f"{store}/{p}" for p in paths]
    return paths, nar, closure, counts, flat


def _integers(sk: np.ndarray, who: np.ndarray, at: np.ndarray, n: int, missing: int):
    """The whole numbers at `at` of the skeleton (entry `who[i]`'s), as an
    array over the entries (`missing` where an entry has none); None where
    one is not a plain integer below 2**53."""
    out = np.full(n, missing, dtype=np.int64)
    if not len(at):
        return out
    chars = sk[np.minimum(at[:, None] + np.arange(MAX_DIGITS + 1), len(sk) - 1)].astype(np.int64) - 48
    digit = (chars >= 0) & (chars <= 9)
    length = np.argmin(digit, axis=1)  # the first byte that is not a digit
    stop = sk[np.minimum(at + length, len(sk) - 1)]
    if not (length >= 1).all() or digit.all(axis=1).any() or (CLASSES[stop] & IS_SCALAR).any():
        return None  # not a number, more digits than 2**53 has, or a fraction or exponent
    value = np.zeros(len(at), dtype=np.int64)
    for k in range(MAX_DIGITS):
        live = length > k
        value[live] = value[live] * 10 + chars[live, k]
    if (value >= 1 << 53).any():
        return None
    out[who] = value
    return out


def _resolve(buf: _Bytes, key_from, key_len, ref_from, ref_len, dir_from, dir_len, store: str):
    """The entry each reference names, by the 32 characters of its hash part
    and then byte for byte; None where one is not found exactly. The
    strings (offset and length in the dump): the entries' paths, the
    references, the storeDir values."""
    a = buf.a
    absolute = a[key_from] == ord("/")
    if absolute.any() and not absolute.all():
        return None
    if absolute.all():
        first = bytes(a[key_from[0]:key_from[0] + key_len[0]])
        skip = first.rfind(b"/") + 1
        if skip < 8:
            return None
        # Every path under one store: a reference, compared whole with a path below, is too.
        if not buf.equal(key_from, np.full(len(key_from), key_from[0]), np.full(len(key_from), skip)):
            return None
    else:
        skip = 0
        if len(dir_from) and not buf.is_text(dir_from, dir_len, store.encode()).all():
            return None
    if (key_len < skip + 32).any() or (ref_len < skip + 32).any():
        return None

    def fingerprint(f):  # the hash part's 32 characters in one word: distinct among the paths, or refused
        out = np.empty(len(f), dtype=np.uint64)

        def piece(lo: int, hi: int) -> None:  # in pieces, as words() reads
            at = f[lo:hi] + skip
            h = np.zeros(len(at), dtype=np.uint64)
            for k, mult in enumerate((0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                                      0x27D4EB2F165667C5)):
                h = (h ^ buf.words(at + 8 * k)) * np.uint64(mult)
            out[lo:hi] = h
        _pieces(piece, len(f), PIECE)
        return out

    keys = fingerprint(key_from)
    by_key = np.argsort(keys)
    sorted_keys = keys[by_key]
    if (sorted_keys[1:] == sorted_keys[:-1]).any():
        return None
    wanted = fingerprint(ref_from)
    place = np.empty(len(wanted), dtype=np.int64)

    def find(lo: int, hi: int) -> None:
        asked = np.argsort(wanted[lo:hi])  # searched in order, each search starts where the last ended
        place[lo + asked] = np.minimum(np.searchsorted(sorted_keys, wanted[lo:hi][asked]), len(keys) - 1)
    _pieces(find, len(wanted), max(PIECE, -(-len(wanted) // usable_cores())))
    if not (sorted_keys[place] == wanted).all():
        return None
    del wanted
    target = by_key[place]
    del place
    if not (key_len[target] == ref_len).all() or not buf.equal(ref_from, key_from[target], ref_len):
        return None
    return target
