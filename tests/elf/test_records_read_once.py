"""RECORDs read fast and once (elf/dists.py), and the lookups built on
them (elf/releases.py), against the plain way: csv's reading of each row,
every file read again, every row indexed."""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import random

from closure_audit.elf import dists as dists_mod
from closure_audit.elf.dists import Prefetched, installed_files, read_distributions, reused, shared_paths
from closure_audit.elf.releases import Releases


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


ROWS = [
    ["nvidia/cu13/lib/libcublas.so.13", digest(b"x"), "1"],
    ["nvidia/cu13/lib/libcublasLt.so.13", digest(b"yy"), "2"],
    ["pkg/__init__.py", "sha256=tooshort", "10"],
    ["pkg/a//b.py", digest(b"z"), "x12"],
    ["./pkg/c.py", "", ""],
    ["../../bin/tool", digest(b"t"), "7"],
    ["/abs/file", digest(b"a"), "3"],
    ["pkg/data.bin", digest(b"d"), "4", "extra"],
    ["pkg/only-path"],
    ["pkg.dist-info/RECORD", "", ""],
]


def write_dist(site, name: str, rows: list[list[str]], quoted: bool = False, crlf: bool = False,
               requires: tuple[str, ...] = ()) -> None:
    d = site / f"{name}-1.0.dist-info"
    d.mkdir(parents=True)
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{meta}\n")
    with open(d / "RECORD", "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL if quoted else csv.QUOTE_MINIMAL,
                   lineterminator="\r\n" if crlf else "\n").writerows(rows)


def fields(d) -> tuple:
    return d.name, d.version, d.files, d.sizes, d.requires, d.minimums, d.outside


def test_a_record_split_by_lines_reads_as_csv_reads_it(tmp_path):
    """The same rows written plainly (split by lines), quoted or with CRLF
    endings (read by csv), and with an empty line: the same files, sizes,
    digests and paths outside the site."""
    got = []
    for i, (quoted, crlf) in enumerate([(False, False), (True, False), (False, True)]):
        site = tmp_path / f"site{i}"
        write_dist(site, "pkg", ROWS, quoted, crlf)
        with open(site / "pkg-1.0.dist-info" / "RECORD", "a", newline="") as f:
            f.write("\n")
        got.append([fields(d) for d in read_distributions(str(site))])
    assert got[0] == got[1] == got[2]
    (name, _, files, sizes, _, _, outside), = got[0]
    assert files["nvidia/cu13/lib/libcublas.so.13"] == digest(b"x")[7:] and files["pkg/__init__.py"] is None
    assert "pkg/a/b.py" in files and "pkg/c.py" in files and "pkg/only-path" in files
    assert sizes == {"nvidia/cu13/lib/libcublas.so.13": 1, "nvidia/cu13/lib/libcublasLt.so.13": 2,
                     "pkg/__init__.py": 10, "../../bin/tool": 7, "/abs/file": 3, "pkg/data.bin": 4}
    assert outside == ["../../bin/tool", "/abs/file"]

    # A path with a comma is quoted by the writer: csv reads it whole.
    site = tmp_path / "comma"
    write_dist(site, "pkg", [["pkg/a,b.py", digest(b"c"), "5"]])
    (d,) = read_distributions(str(site))
    assert d.files == {"pkg/a,b.py": digest(b"c")[7:]} and d.sizes == {"pkg/a,b.py": 5}


def test_distributions_are_read_once_within_an_audit_and_afresh_outside(tmp_path):
    """A prefetching process reads what read_distributions reads; inside
    reused() each dist-info is read once (a rewritten RECORD is not read
    again), outside every call reads the files."""
    site = tmp_path / "site-packages"
    rng = random.Random(5)
    for n in range(6):
        rows = [[f"pkg{n}/m{rng.randrange(50)}.so", digest(bytes([n, i])), str(i)] for i in range(40)]
        write_dist(site, f"pkg{n}", rows + [[f"pkg{n}.dist-info/RECORD", "", ""]], requires=("numpy>=1.25",))
    plain = read_distributions(str(site))
    prefetched = Prefetched([str(site)])
    taken = prefetched.take()
    assert [fields(taken[d.dist_info]) for d in plain] == [fields(d) for d in plain]

    with reused(taken):
        first = read_distributions(str(site))
        assert all(a is taken[a.dist_info] for a in first)
        write_dist(tmp_path / "other", "pkg0", [["x", "", ""]])
        os.replace(tmp_path / "other" / "pkg0-1.0.dist-info" / "RECORD", site / "pkg0-1.0.dist-info" / "RECORD")
        assert read_distributions(str(site))[0] is first[0]
    assert read_distributions(str(site))[0].files == {"x": None}
    assert dists_mod._READ is None


def naive_owners(dists) -> dict:
    out: dict = {}
    for d in dists:
        for rel in d.files:
            out.setdefault(rel, []).append(d)
    return out


def test_shared_paths_and_releases_agree_with_every_row_indexed(tmp_path):
    """shared_paths: the paths two RECORDs claim, in order, as indexing every
    row gives them; Releases: each file's claims found by its path in the
    site, and by its absolute path for RECORD paths outside the site."""
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    lib = site / "nvidia" / "lib" / "libcudnn.so.9"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"cudnn 13")
    tool = tmp_path / "bin" / "libtool.so"
    tool.parent.mkdir()
    tool.write_bytes(b"tool")
    write_dist(site, "nvidia_cudnn_cu12", [["nvidia/lib/libcudnn.so.9", digest(b"cudnn 12"), "8"],
                                           ["nvidia/lib/other.so", digest(b"o"), "1"]])
    write_dist(site, "nvidia_cudnn_cu13", [["nvidia/lib/libcudnn.so.9", digest(b"cudnn 13"), "8"],
                                           ["../../bin/libtool.so", digest(b"tool"), "4"]])
    dists = read_distributions(str(site))
    want = [(rel, owners) for rel, owners in sorted(naive_owners(dists).items()) if len(owners) > 1]
    assert shared_paths(dists) == want == [("nvidia/lib/libcudnn.so.9", dists)]

    releases = Releases([(str(site), dists)])
    cudnn = releases.of(str(lib))  # equal sizes: the bytes' SHA-256 tells
    assert (cudnn.version, cudnn.source) == ("1.0", "nvidia_cudnn_cu13 1.0's RECORD")
    assert releases.of(str(tool)).source == "nvidia_cudnn_cu13 1.0's RECORD"
    assert releases.of(str(site / "nvidia" / "lib" / "missing.so")) is None

    installed = installed_files([(str(site), dists)])
    assert bool(installed) and installed.get("libtool.so") == [(dists[1], str(tool))]
    assert sorted(installed) == sorted(dict(installed.items()))


def test_without_a_process_to_fork_the_records_are_read_when_asked(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    write_dist(site, "pkg", ROWS)

    def refused():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    prefetched = Prefetched([str(site)])
    assert prefetched.take() == {}
    prefetched.close()
    with reused(prefetched.take()):
        assert [fields(d) for d in read_distributions(str(site))] == [fields(d) for d in read_distributions(str(site))]
