"""The audit's walk and what runs beside it (elf/walk.py, elf/strings.py,
elf/forked.py), each against the plain way of doing the same: the walk that
opens files relative to their directory against the walk through path
names, names read in pieces against names searched in the whole mapping,
forked workers against reading in this process."""

from __future__ import annotations

import glob
import os
import random
import shutil

from closure_audit.elf import strings
from closure_audit.elf.files import HostFiles
from closure_audit.elf.strings import NameReader, names_in, names_read, read_names, read_names_or_error
from closure_audit.elf.walk import Walker


class PathFiles(HostFiles):
    """The host's files read through their path names: the walk's general
    loop (a wheel's and a NAR's files take it too)."""


def scan_of(top: str, files: HostFiles, allow=None) -> tuple:
    found = []
    w = Walker(allow or (lambda p: p.startswith(top)), files=files, found=lambda p, e: found.append(p))
    w.add(top)
    s = w.scan
    return (s.files, list(s.elf.items()), s.problems, s.skipped_links,
            {t: (h.files, h.elf, h.invalid) for t, h in s.targets.items()}, found)


def host_libraries(n: int) -> list[str]:
    libs = sorted(p for p in glob.glob("/usr/lib/x86_64-linux-gnu/*.so*") if os.path.isfile(p)
                  and not os.path.islink(p))
    return random.Random(3).sample(libs, min(n, len(libs)))


def test_the_walk_by_directory_finds_what_the_walk_by_path_finds(tmp_path):
    """ELF files, files too short for their ELF magic, empty files, hard
    links (counted where each is found, read once), symlinks to files and to
    directories inside and outside the tree, a dangling library link, a
    FIFO, a name that is not UTF-8: the same scan, in the same order."""
    top = tmp_path / "tree"
    (top / "a" / "b").mkdir(parents=True)
    (top / "c").mkdir()
    libs = host_libraries(4)
    for i, lib in enumerate(libs):
        shutil.copy(lib, top / ("a" if i % 2 else "c") / os.path.basename(lib))
    (top / "a" / "short.so").write_bytes(b"\x7fELF\x02\x01")  # the magic, then nothing a header needs
    (top / "a" / "b" / "empty").write_bytes(b"")
    (top / "a" / "b" / "text.py").write_text("import os\n")
    (top / "a" / "b" / b"caf\xe9.so".decode(errors="surrogateescape")).write_bytes(b"\x7fELF")
    os.link(top / "c" / os.path.basename(libs[0]), top / "a" / "b" / "hard.so")
    os.symlink(os.path.basename(libs[0]), top / "c" / "link.so")
    os.symlink("../c", top / "a" / "dirlink")
    os.symlink("missing.so.1", top / "a" / "dangling.so.1")
    os.mkfifo(top / "a" / "fifo")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(libs[1], outside / "lib.so")
    os.symlink(outside, top / "out")
    os.symlink(outside / "lib.so", top / "outlib.so")

    fast = scan_of(str(top), HostFiles())
    assert fast == scan_of(str(top), PathFiles())
    files, elf, problems, skipped, _, found = fast
    assert len(elf) == len(libs) and found == [p for p, _ in elf]
    assert {os.path.basename(p) for p, _ in problems} >= {"short.so", b"caf\xe9.so".decode(errors="surrogateescape"),
                                                         "dangling.so.1"}
    assert skipped == 2  # the links leading out of the tree

    # Allowed to leave the tree (as a Nix profile's links are): the same again.
    assert scan_of(str(top), HostFiles(), lambda p: True) == scan_of(str(top), PathFiles(), lambda p: True)


def test_names_read_in_pieces_are_those_of_the_whole(tmp_path):
    """names_read, whatever the size of its pieces, finds what names_in finds
    in the whole range: names straddling pieces, runs longer than a name,
    text around names."""
    rng = random.Random(11)
    words = [b"libcuda.so.1", b"libnvrtc.so.%d", b"have you linked against libtorch.so?", b"\x82\xdclibcublas.so.13",
             b"cudaFree@libcudart.so.13", b"registration olibcuda.so.1", b"x" * 300 + b".so", b"\x124Blibmlx5.so",
             b"libfoo.so.x", b"lib%s.so"]
    path = tmp_path / "data"
    for _ in range(150):
        data = b"".join(rng.choice(words) + rng.choice([b"\0", b"", b" "]) + bytes(rng.randrange(4))
                        for _ in range(rng.randrange(1, 60)))
        path.write_bytes(data)
        start = rng.randrange(8)
        end = rng.randrange(start, len(data) + 1)
        want = names_in(data, start, end, ".rodata")
        fd = os.open(path, os.O_RDONLY)
        try:
            for chunk in (1, 2, 3, 17, 255, 256, 600, 1 << 18):
                assert names_read(fd, start, end, ".rodata", chunk) == want, (data, start, end, chunk)
        finally:
            os.close(fd)
    assert names_read(os.open(path, os.O_RDONLY), 0, 0, ".rodata") == []


def workers_of(reader: NameReader) -> list[int]:
    return [w.pid for w in reader._workers]


def reaped(pids: list[int]) -> bool:
    """Every one of these forks waited for: none is a child of this process
    any more (others, of other tests, may be)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return bool(pids)


def test_forked_workers_read_what_this_process_reads(tmp_path, monkeypatch):
    """Every file sent to workers (BIG lowered so that all are), spread over
    several: the same names, notes, bytes searched and errors as read here,
    and no worker left behind."""
    libs = host_libraries(12)
    missing = str(tmp_path / "gone.so")
    odd = tmp_path / b"\xff.so".decode(errors="surrogateescape")
    shutil.copy(libs[0], odd)
    paths = libs + [missing, str(odd)]
    want = {p: read_names_or_error(p) for p in paths}
    assert isinstance(want[missing], str) and any(want[p][0] for p in libs)

    monkeypatch.setattr(strings, "BIG", 1)
    reader = NameReader(workers=4)
    for p in paths:
        reader.submit(p)
    assert len(reader._workers) == 3
    pids = workers_of(reader)
    assert reader.results() == want
    assert reaped(pids)

    # Names found before the first worker is forked are read here.
    monkeypatch.setattr(strings, "BIG", os.path.getsize(libs[0]) + os.path.getsize(libs[1]) + 1)
    reader = NameReader(workers=2)
    for p in paths:
        reader.submit(p)
    pids = workers_of(reader)
    assert reader._pending[libs[0]] is None and reader.results() == want
    assert reaped(pids)


def test_an_abandoned_reader_leaves_no_worker(monkeypatch):
    """An audit that fails after the walk closes its reader: the workers are
    stopped, whatever they were doing."""
    monkeypatch.setattr(strings, "BIG", 1)
    reader = NameReader(workers=3)
    for p in host_libraries(6):
        reader.submit(p)
    pids = workers_of(reader)
    reader.close()
    assert reaped(pids)


def test_names_read_from_a_file_without_section_table_match_the_mapping(tmp_path):
    """The whole file searched, in pieces: the names a search of the whole
    image finds."""
    lib = host_libraries(1)[0]
    data = bytearray(open(lib, "rb").read())
    data[0x28:0x30] = bytes(8)
    data[0x3C:0x40] = bytes(4)
    bare = tmp_path / "bare.so"
    bare.write_bytes(data)
    names, searched = read_names(str(bare))
    assert searched == len(data)
    assert [n for n in names if isinstance(n, strings.NameString)] == names_in(bytes(data), 0, len(data), "(whole file)")


def test_without_a_process_to_fork_the_names_are_read_here(monkeypatch):
    """fork failing (EAGAIN where processes run out): every file read in this
    process, the same results, no descriptor left open."""
    libs = host_libraries(5)
    want = {p: read_names_or_error(p) for p in libs}

    def refused():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    fds = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(strings, "BIG", 1)
    monkeypatch.setattr(os, "fork", refused)
    reader = NameReader(workers=4)
    for p in libs:
        reader.submit(p)
    assert not reader._workers and all(w is None for w in reader._pending.values())
    assert reader.results() == want
    assert len(os.listdir("/proc/self/fd")) == fds


def test_the_audit_process_reads_what_no_worker_has_started(monkeypatch):
    """A worker held still (SIGSTOP) while the results are asked for: this
    process reads the files it has not taken, from the last one back, and
    the results are those of every file read here."""
    import signal
    import threading

    libs = host_libraries(8)
    want = {p: read_names_or_error(p) for p in libs}
    monkeypatch.setattr(strings, "BIG", 1)
    reader = NameReader(workers=2)
    reader.submit(libs[0])
    (worker,) = reader._workers
    pid = worker.pid
    os.kill(pid, signal.SIGSTOP)
    for p in libs[1:]:
        reader.submit(p)
    taken = reader._taken

    def resume_once_taken():
        while not all(taken[i] for i in range(len(libs))):
            threading.Event().wait(0.01)
        os.kill(pid, signal.SIGCONT)

    threading.Thread(target=resume_once_taken, daemon=True).start()
    by_main = []
    original = strings.read_names_or_error
    monkeypatch.setattr(strings, "read_names_or_error", lambda p: by_main.append(p) or original(p))
    assert reader.results() == want
    assert by_main[:len(libs) - 1] == libs[:0:-1]  # all but perhaps the first, from the last back
    assert reaped([pid])
