"""The skeleton of a dump: its text with every string's contents taken out
(`"..."` -> `""`, scan.py), the class of each of its bytes, and whether it
is a JSON text, checked by orjson a piece at a time."""

from __future__ import annotations

import numpy as np

OPEN, CLOSE = b"{[", b"}]"
SPACE = b" \t\n\r"

# Byte classes of the skeleton.
IS_SPACE, IS_OPEN, IS_CLOSE, IS_SCALAR = 1, 2, 4, 8
CLASSES = np.zeros(256, dtype=np.uint8)
CLASSES[list(SPACE)] = IS_SPACE
CLASSES[list(OPEN)] = IS_OPEN
CLASSES[list(CLOSE)] = IS_CLOSE
CLASSES[list(b"-0123456789.eEtrufalsn")] = IS_SCALAR  # numbers, true, false, null


CHECKED = 1 << 20  # bytes of the skeleton orjson checks at once


def is_json(sk: np.ndarray, cls: np.ndarray, brackets: np.ndarray, opened: np.ndarray) -> bool:
    """Whether the skeleton is a JSON text, checked by orjson a piece at a
    time: the top container's elements, a megabyte of them to a piece,
    each piece in the container's own brackets (whole, orjson's parse of a
    million-path skeleton held 1.1 GB at once). Pieces cut at any commas
    between elements, each valid in the brackets, are valid joined again by
    those commas; the cuts are found by counting brackets, so a text that
    is not JSON only makes a piece that is not either."""
    import orjson

    solid = np.flatnonzero(cls[:CHECKED] != IS_SPACE)
    tail = np.flatnonzero(cls[-CHECKED:] != IS_SPACE)
    if not solid.size or not tail.size or sk[solid[0]] not in OPEN or not brackets.size:
        return _parses(orjson, sk.tobytes())
    first, last = int(solid[0]), len(sk) - len(cls[-CHECKED:]) + int(tail[-1])
    if first != brackets[0] or last != brackets[-1] or sk[last] != CLOSE[OPEN.index(sk[first])]:
        return False  # text around the top container, or another container's close ending it
    # The top container's elements end at the closes that leave it alone open.
    ends = brackets[(opened == 1) & (cls[brackets] == IS_CLOSE)]
    if ends.size:  # about one a megabyte
        ends = ends[np.unique(np.minimum(np.searchsorted(ends, np.arange(first, last, CHECKED)), ends.size - 1))]
    cuts = [first]
    for end in ends[ends < last].tolist():
        at = end + 1
        while cls[at] == IS_SPACE:
            at += 1
        if sk[at] == ord(",") and at > cuts[-1]:
            cuts.append(at)
    if len(cuts) > 1 and not (cls[cuts[-1] + 1:last] != IS_SPACE).any():
        return False  # a comma with no element after it: every other piece holds the element before its cut
    cuts.append(last)
    left, right = bytes(sk[first:first + 1]), bytes(sk[last:last + 1])
    return all(_parses(orjson, left + sk[lo + 1:hi].tobytes() + right) for lo, hi in zip(cuts, cuts[1:]))


def _parses(orjson, text: bytes) -> bool:
    try:
        orjson.loads(text)
    except ValueError:
        return False
    return True
