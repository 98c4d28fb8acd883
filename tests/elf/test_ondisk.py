"""elf/ondisk.py: what lies on disk of the files RECORDs claim and of the
copies of a library, read from files written here and checked against
hashlib's SHA-256 of their bytes; sizes decide without reading a file where
they can."""

from __future__ import annotations

import hashlib
import os

import pytest

from closure_audit.elf import ondisk
from closure_audit.elf.ondisk import contested, identical, identical_sets, present
from recordfiles import CU12, CU13, LIB, dist, setup


def no_hashing(monkeypatch):
    monkeypatch.setattr(ondisk, "sha256", lambda path: pytest.fail(f"hashed {path}"))


def test_whose_bytes_are_on_disk_by_size_alone(tmp_path, monkeypatch):
    """A gigabyte of cuDNN is not hashed where RECORD's sizes tell."""
    site = setup(tmp_path, {LIB: CU12[LIB]})
    cu13 = dist(site, "nvidia-cudnn-cu13", "9.24.0.5", {LIB: CU13[LIB]})
    cu12 = dist(site, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: CU12[LIB]})
    no_hashing(monkeypatch)
    (c,) = contested(str(site), [cu13, cu12])
    assert (c.path, c.claimants, c.on_disk) == (str(site / LIB), [cu13, cu12], cu12)


def test_equal_sizes_or_sizes_not_recorded_are_decided_by_the_hash(tmp_path):
    same_size = {LIB: b"a" * 64}
    site = setup(tmp_path, same_size)
    a = dist(site, "nvidia-cudnn-cu13", "9.24.0.5", same_size)
    b = dist(site, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: b"b" * 64})
    assert [c.on_disk for c in contested(str(site), [a, b])] == [a]
    unsized = [dist(site, "nvidia-cudnn-cu13", "9.24.0.5", same_size, sized=False),
               dist(site, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: b"b" * 64}, sized=False)]
    assert [c.on_disk for c in contested(str(site), unsized)] == [unsized[0]]
    (site / LIB).write_bytes(b"c" * 64)  # neither's bytes
    assert [c.on_disk for c in contested(str(site), [a, b])] == [None]


def test_a_size_no_record_gives_is_neither_and_is_not_read(tmp_path, monkeypatch):
    site = setup(tmp_path, {LIB: b"x" * 7})
    no_hashing(monkeypatch)
    (c,) = contested(str(site), [dist(site, "a", "1", {LIB: CU13[LIB]}), dist(site, "b", "1", {LIB: CU12[LIB]})])
    assert c.on_disk is None


def test_only_paths_claimed_with_other_bytes_and_on_disk(tmp_path):
    site = setup(tmp_path, CU12)
    shared = {LIB: CU12[LIB]}
    assert contested(str(site), [dist(site, "a", "1", shared), dist(site, "b", "1", shared)]) == []
    assert contested(str(site), [dist(site, "a", "1", {"gone.so": b"1"}), dist(site, "b", "1", {"gone.so": b"2"})]) == []
    assert contested(str(site), [dist(site, "nvidia-cudnn-cu12", "9.28.0.42", CU12)]) == []
    both = contested(str(site), [dist(site, "a", "1", CU13), dist(site, "b", "1", CU12)])
    assert [c.path for c in both] == sorted(str(site / rel) for rel in CU12)


def test_identical_copies_and_their_sha256(tmp_path, monkeypatch):
    data = b"\x7fELF libcudart" * 100
    one, two, other, short = (tmp_path / n for n in ("one.so", "two.so", "other.so", "short.so"))
    one.write_bytes(data)
    two.write_bytes(data)
    other.write_bytes(data[:-1] + b"!")
    short.write_bytes(data[:-1])
    assert identical([str(one), str(two)]) == hashlib.sha256(data).hexdigest()
    assert identical([str(one), str(other)]) is None
    assert identical([str(one), str(tmp_path / "gone.so")]) is None
    assert identical_sets([[str(two), str(one)], [str(one), str(other)]]) == {
        (str(one), str(two)): hashlib.sha256(data).hexdigest(), (str(one), str(other)): None}
    no_hashing(monkeypatch)  # copies of different sizes are never read
    assert identical([str(one), str(short)]) is None


def test_present_follows_links(tmp_path):
    there = tmp_path / "libnvvm.so.4"
    there.write_bytes(b"")
    link, dangling = tmp_path / "libnvvm.so", tmp_path / "libgone.so"
    os.symlink(there.name, link)
    os.symlink("nowhere.so", dangling)
    assert present([str(there), str(link), str(dangling), str(tmp_path / "absent.so")]) == {str(there), str(link)}
