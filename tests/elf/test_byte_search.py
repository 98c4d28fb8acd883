"""The byte search behind the evidence scanner: exact offsets across read and
split boundaries, in one process or several."""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from closure_audit.elf import search
from closure_audit.closure.evidence import Scanner

HASHES = [b"0" * 32, b"abcdfghijklmnpqrsvwxyz0123456789", b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz1"]
# Short needles take the other search path (a compiled literal): a container's
# magic, and one that overlaps itself ("ababa" holds it twice).
NEEDLES = HASHES + [bytes.fromhex("50ed55ba"), b"aba"]


def naive(data: bytes, needles) -> list[tuple[int, int]]:
    out = []
    for i, n in enumerate(needles):
        pos = data.find(n)
        while pos >= 0:
            out.append((pos, i))
            pos = data.find(n, pos + 1)
    return sorted(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filler=st.binary(min_size=0, max_size=3000), places=st.lists(
    st.tuples(st.integers(0, 3000), st.integers(0, len(NEEDLES) - 1)), max_size=12), buffer=st.integers(1, 200),
    split=st.integers(1, 4000))
def test_search_matches_a_naive_search(tmp_path, monkeypatch, filler, places, buffer, split):
    data = bytearray(filler)
    for at, which in places:
        at = min(at, len(data))
        data[at:at] = NEEDLES[which]
    data = bytes(data)
    path = tmp_path / "blob"
    path.write_bytes(data)
    monkeypatch.setattr(search, "BUFFER", buffer)
    found = []
    for start in range(0, max(len(data), 1), split):  # ranges as the worker pool splits a file
        found += search.search(str(path), start, min(len(data), start + split), tuple(NEEDLES))
    assert sorted(found) == naive(data, NEEDLES)


def test_parallel_and_serial_scans_agree(tmp_path, monkeypatch):
    store = tmp_path / "store"
    referrer = store / ("a" * 32 + "-big")
    (referrer / "lib").mkdir(parents=True)
    target = f"{store}/{'b' * 32}-dep"
    # Random bytes hold no "b", so no byte beside a planted hash part extends it into another match.
    blob = bytearray(random.Random(11).randbytes(300_000).replace(b"b", b"c"))
    for at in (0, 65_535, 131_072 - 7, 299_968):
        blob[at:at + 32] = b"b" * 32
    (referrer / "lib/libbig.so").write_bytes(bytes(blob))
    (referrer / "share").mkdir()
    (referrer / "share/x.cmake").write_text(f"set(X {target})\n")
    os.symlink(target, referrer / "share/link")
    monkeypatch.setattr(search, "SPLIT", 50_000)
    monkeypatch.setattr(search, "PARALLEL_MIN", 1)
    monkeypatch.setattr(search, "BUFFER", 4096)
    wanted = {str(referrer): {"b" * 32: target}}
    runs = []
    for workers in (1, 2):
        ev = Scanner(str(store), workers=workers).scan_all(wanted)[str(referrer)][target]
        runs.append(sorted((h.file, h.offset, h.kind) for h in ev.hits))
    assert runs[0] == runs[1]
    assert runs[0] == sorted([("lib/libbig.so", o, "text") for o in (0, 65_535, 131_065, 299_968)]
                             + [("share/x.cmake", 6 + len(str(store)) + 1, "text"),
                                ("share/link", len(str(store)) + 1, "symlink")])
