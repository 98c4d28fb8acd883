"""The local narinfo cache's file (cache/kept.py) where it cannot be used,
outside a walk, where a failure would reach the caller: it never does. The
commands' side (answers right, nothing on stderr) is in
tests/commands/test_store_option.py."""

from __future__ import annotations

import sqlite3

import pytest

from closure_audit.cache.kept import FILE, KeptNarinfos

URL = "https://cache.example"


def test_kept_is_read_back_by_a_later_run_only(tmp_path):
    first = KeptNarinfos(str(tmp_path), URL)
    first.keep("a" * 32, "StorePath: x\n")
    assert first.get("a" * 32) is None  # there was no database when the run began: nothing is looked up
    later = KeptNarinfos(str(tmp_path), URL)
    assert later.get("a" * 32) == "StorePath: x\n" and later.get("b" * 32) is None
    assert KeptNarinfos(str(tmp_path), URL + "/other").get("a" * 32) is None  # each cache its own rows
    later.keep("a" * 32, "StorePath: y\n")
    assert later.get("a" * 32) == "StorePath: y\n"  # replaced
    with sqlite3.connect(tmp_path / FILE) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("damage", ["not a directory", "not a database", "locked"])
def test_a_cache_that_cannot_be_used_raises_nothing(tmp_path, damage):
    cache_dir = tmp_path / "closure-audit"
    holder = None
    if damage == "not a directory":
        cache_dir.write_text("a file")
    elif damage == "not a database":
        cache_dir.mkdir()
        (cache_dir / FILE).write_bytes(b"garbage" * 1000)
    else:
        KeptNarinfos(str(cache_dir), URL).keep("a" * 32, "kept")
        holder = sqlite3.connect(cache_dir / FILE, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    kept = KeptNarinfos(str(cache_dir), URL)
    try:
        kept.keep("b" * 32, "new")
        assert kept.get("b" * 32) is None
        assert kept.get("a" * 32) == ("kept" if damage == "locked" else None)  # a reader never waits for a writer
        with kept.writing_behind():
            kept.keep("c" * 32, "new")
    finally:
        if holder is not None:
            holder.close()
        kept.close()
    if damage == "not a database":
        assert (cache_dir / FILE).read_bytes() == b"garbage" * 1000
    elif damage == "locked":
        assert KeptNarinfos(str(cache_dir), URL).get("b" * 32) is None  # not kept, and no error
