"""Dumps read from their bytes (closure/scan.py) against the JSON reading
(orjson, parse_path_info, build_graph): random dumps in every shape Nix
writes, compact and indented, with the fields Nix adds around the ones read,
and damaged ones. Either both give the same graph, array for array, or both
refuse the dump with the same message; and the common shapes are read by the
scanner itself, never handed back to JSON."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from closure_audit import util
from closure_audit.closure import scan, skeleton
from closure_audit.closure.graph import build_graph, loads, parse_path_info, read_path_info
from closure_audit.errors import ClosureError

S = "/nix/store"
B32 = "0123456789abcdfghijklmnpqrsvwxyz"
NAMES = st.text("abcdefghijklmnopqrstuvwxyz0123456789.+_-", min_size=1, max_size=90)


@st.composite
def dumps(draw):
    n = draw(st.integers(1, 25))
    hashes = draw(st.lists(st.text(B32, min_size=32, max_size=32), min_size=n, max_size=n, unique=True))
    names = draw(st.lists(NAMES, min_size=n, max_size=n))
    base = [f"{h}-{m}" for h, m in zip(hashes, names)]
    shape = draw(st.sampled_from(["list", "object", "basenames"]))
    with_closure = draw(st.booleans())
    entries = []
    for i in range(n):
        refs = sorted(set(draw(st.lists(st.integers(0, n - 1), max_size=6))))
        e = {"deriver": f"{S}/{hashes[i][::-1]}-{names[i]}.drv", "narHash": "sha256-AAAA",
             "narSize": draw(st.integers(0, (1 << 53) - 1)),
             "references": [base[r] if shape == "basenames" else f"{S}/{base[r]}" for r in refs],
             "registrationTime": 1_700_000_000, "signatures": ["cache:sig=="], "ultimate": False,
             "ca": draw(st.sampled_from([None, "fixed:r:sha256:x", {"method": "nar", "hash": [1, 2]}]))}
        if with_closure:
            e["closureSize"] = draw(st.integers(0, (1 << 53) - 1))
        if shape == "list":
            e = {"path": f"{S}/{base[i]}", **e, "valid": True}
        elif shape == "basenames":
            e["storeDir"] = S
        entries.append((base[i] if shape == "basenames" else f"{S}/{base[i]}", e))
    if draw(st.booleans()):
        entries = entries[::-1]  # not in the paths' order
    data = [e for _, e in entries] if shape == "list" else dict(entries)
    return json.dumps(data, indent=draw(st.sampled_from([None, 2])),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": ")]))).encode()


def json_graph(data: bytes):
    return build_graph(parse_path_info(loads(data), S, "t"))


def outcome(read, data: bytes):
    try:
        g = read(data)
    except (ClosureError, ValueError) as exc:
        return type(exc), str(exc)
    return (g.paths, g.index, *(getattr(g, a).tolist() for a in ("nar", "nix_closure", "ptr", "targets",
                                                                  "self_reference")))


def same(data: bytes):
    got = outcome(lambda d: read_path_info(d, S, "t"), data)
    assert got == outcome(json_graph, data)
    return got


@settings(max_examples=300, deadline=None)
@given(dumps())
def test_dumps_read_from_bytes_as_json_reads_them(data):
    same(data)
    assert scan.scan(data, S) is not None  # Nix's shapes are the scanner's own


@settings(max_examples=100, deadline=None)
@given(dumps())
def test_dumps_checked_in_small_pieces_are_read_alike(data):
    """The syntax check a few bytes at a time, on dumps indented and not."""
    checked = skeleton.CHECKED
    skeleton.CHECKED = 16
    try:
        same(data)
        assert scan.scan(data, S) is not None
    finally:
        skeleton.CHECKED = checked


DAMAGE = [
    (b'"narSize":', b'"narSize":-'),  # a negative size
    (b'"narSize":', b'"narSize":1.5e'),  # a fraction
    (b'"narSize":', b'"narSize":"'),  # a string
    (b'"narSize":', b'"narSize":99999999999999999'),  # past 2**53
    (b'"narSize"', b'"narsize"'),  # no size
    (b'"references":[', b'"references":[1,'),  # a reference that is not a string
    (b'"references":[', b'"references":[[],'),
    (b'"references":[', b'"references":{"a":'),
    (b'"references":[', b'"references":"x","r":['),  # references not a list
    (b'"deriver":', b'"references":[],"deriver":'),  # the key twice
    (b'"narSize":', b'"narSize":1,"narSize":'),
    (b'-pkg', b'\\u002dpkg'),  # an escape
    (b'-pkg', b'-p\xc3\xa9kg'),  # not ASCII
    (b'"ultimate":false}', b'"ultimate":false'),  # not JSON
    (b'"ultimate":false', b'"ultimate":false,'),
    (b'"storeDir":"/nix/store"', b'"storeDir":"/gnu/store"'),
    (b'"storeDir":"/nix/store"', b'"storeDir":7'),
    (b'"valid":true', b'"valid":false'),
    (b'"path":', b'"path":null,"p":'),
]


def compact(n: int, shape: str) -> bytes:
    base = [f"{B32[i % 32] * 31}{B32[i // 32]}-pkg{i}" for i in range(n)]
    entries = []
    for i in range(n):
        refs = [base[j] if shape == "basenames" else f"{S}/{base[j]}" for j in (0, i) if j <= i]
        e = {"deriver": f"{S}/x.drv", "narSize": 10 * i + 1, "references": refs, "ultimate": False}
        if shape == "list":
            e = {"path": f"{S}/{base[i]}", **e, "valid": True}
        elif shape == "basenames":
            e["storeDir"] = S
        entries.append((base[i] if shape == "basenames" else f"{S}/{base[i]}", e))
    data = [e for _, e in entries] if shape == "list" else dict(entries)
    return json.dumps(data, separators=(",", ":")).encode()


@pytest.mark.parametrize("shape, old, new", [(shape, old, new) for shape in ("list", "object", "basenames")
                                              for old, new in DAMAGE if old in compact(4, shape)])
def test_damaged_dumps_are_refused_or_read_as_json_does(shape, old, new):
    damaged = compact(4, shape).replace(old, new, 1)
    same(damaged)


# Texts that are not JSON only where cut into pieces (between the top
# container's elements) and each piece is checked alone.
NOT_JSON_IN_PIECES = [
    (b"}}", b"},}", "object"),  # a comma with no element after it
    (b"}]", b"},]", "list"),
    (b"}]", b"}]]", "list"),  # a close too many
    (b"},", b"},,", "object"),  # an empty element between two
    (b"},", b"}}", "object"),
    (b"},", b"}, ", "list"),
    (b"},", b"} ,", "object"),
]


@pytest.mark.parametrize("checked", [1, 40, 1 << 20])
@pytest.mark.parametrize("old, new, shape", NOT_JSON_IN_PIECES)
def test_the_syntax_is_checked_a_piece_at_a_time_as_whole(checked, old, new, shape, monkeypatch):
    """The skeleton's syntax is checked by orjson a piece at a time, cut at
    the commas between the top container's elements: a text is read only
    where it is JSON whole, and refused with JSON's own error otherwise."""
    monkeypatch.setattr(skeleton, "CHECKED", checked)
    data = compact(12, shape)
    assert scan.scan(data, S) is not None
    cut = data.rfind(old) if old in (b"}}", b"}]") else data.find(old, len(data) // 2)
    damaged = data[:cut] + new + data[cut + len(old):]
    try:
        json.loads(damaged)
    except ValueError:
        assert issubclass(same(damaged)[0], ValueError)
        assert scan.scan(damaged, S) is None
    else:  # the same text whole is JSON (a space): read by the scanner, as JSON reads it
        same(damaged)
        assert scan.scan(damaged, S) is not None


def test_references_are_resolved_by_their_whole_text():
    """A reference with a path's hash part but another name is not that path:
    the closure is incomplete, as a lookup of its text says."""
    data = compact(3, "object")
    other = data.replace(b'"/nix/store/1111111111111111111111111111111' + b'0-pkg1"]', b'"/nix/store/'
                         + b'1111111111111111111111111111111' + b'0-pkg9"]')
    assert other != data
    assert same(other)[0] is ClosureError
    assert same(data.replace(b"-pkg1", b"-pkX", 1))[0] is ClosureError  # the entry renamed, not its referrers


def test_a_path_listed_twice_is_read_as_json_reads_it():
    data = compact(3, "list")
    twice = data[:-1] + b"," + data[1:data.index(b"},") + 1] + b"]"
    assert len(json.loads(twice)) == 4
    same(twice)


def test_a_report_or_an_empty_dump_is_not_a_closure():
    for data in (b'{"schema":"closure-audit/report/1","targets":[]}', b"{}", b"[]", b'{"a":null}'):
        assert same(data)[0] is ClosureError


def test_the_last_bytes_of_a_dump_are_compared_exactly():
    """A dump whose last reference ends a few bytes before its end: the
    byte-for-byte comparison reads past no end."""
    data = compact(40, "object")
    tail = json.loads(data)
    last = sorted(tail)[-1]
    tail[last] = {"narSize": 1, "references": [last]}
    data = json.dumps(tail, separators=(",", ":")).encode()
    got = same(data)
    assert got[-1][-1] is True  # the last path references itself
    assert scan.scan(data, S) is not None


@pytest.mark.parametrize("piece", [1 << 20, 7])
def test_word_reads_match_the_bytes(piece, monkeypatch):
    monkeypatch.setattr(scan, "PIECE", piece)
    data = bytes(range(256)) * 3 + b"xyz"
    buf = scan._Bytes(data)
    at = np.arange(len(data))
    words = buf.words(at)
    assert [int(w) for w in words] == [int.from_bytes(data[i:i + 8].ljust(8, b"\0"), "little") for i in at]
    assert (buf.words(at.reshape(-1, 3)) == words.reshape(-1, 3)).all()


@pytest.mark.parametrize("threads", [1, 4])
def test_a_dump_read_in_small_pieces_is_read_alike(threads, monkeypatch):
    """The quotes found a few bytes at a time, words and containers a few
    strings at a time, the comparisons a few references at a time: on one
    thread, and on four at once."""
    data = compact(40, "list")
    whole = same(data)
    monkeypatch.setattr(scan, "THREADS", threads)
    monkeypatch.setattr(util.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    for name, value in (("BLOCK", 64), ("PIECE", 3), ("SKELETON_PIECE", 5)):
        monkeypatch.setattr(scan, name, value)
    monkeypatch.setattr(skeleton, "CHECKED", 16)
    monkeypatch.setattr(scan._Bytes.equal, "__defaults__", (2,))
    assert scan.scan(data, S) is not None and same(data) == whole


def test_the_closure_commands_ask_numpy_for_no_huge_pages():
    """Compacting memory for huge pages stalls every fresh array of a large
    read; a user's own NUMPY_MADVISE_HUGEPAGE still wins."""
    import subprocess
    import sys

    probe = ("import closure_audit.closure.graph, numpy; "
             "print(numpy._core.multiarray._set_madvise_hugepage(False))")
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    for setting, advised in ((None, "False"), ("1", "True")):
        p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=env if setting is None else {**env, "NUMPY_MADVISE_HUGEPAGE": setting})
        assert p.stdout.strip() == advised, p.stderr


def test_a_read_keeps_the_memory_it_frees_for_its_next_arrays():
    """glibc maps every large block on its own and unmaps it when freed, so
    each large array of a read was memory the kernel faulted in and zeroed
    again. Within kept_heap() (nested, as load_dump and scan nest it) an
    array reuses the pages of the one freed before it; after, glibc maps
    large blocks on their own again."""
    import subprocess
    import sys

    probe = """if True:
        import resource
        import numpy as np
        from closure_audit.closure.heap import kept_heap

        def faults():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(8):
                np.ones(64 << 20, dtype=np.uint8)
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

        with kept_heap():
            with kept_heap():
                pass
            kept = faults()
        print(kept, faults())
    """
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    kept, after = map(int, p.stdout.split())
    assert 3 * kept < after, (kept, after)


@pytest.mark.parametrize("shape", ["list", "object", "basenames"])
def test_a_mapped_file_is_read_as_its_bytes_are(shape, tmp_path):
    """load_dump maps a regular file into memory instead of reading it: the
    scan, and the JSON reading it hands a dump back to, take either."""
    import mmap

    for data in (compact(30, shape), compact(30, shape).replace(b"-pkg", b"\\u002dpkg", 1)):
        file = tmp_path / "dump.json"
        file.write_bytes(data)
        with open(file, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert outcome(lambda d: read_path_info(d, S, "t"), mapped) == same(data)
