"""The local narinfo cache: the narinfos of every binary cache in one SQLite
file, $XDG_CACHE_HOME/closure-audit/narinfo-v1.sqlite.

One file, as Nix keeps its own: a file per narinfo cost 0.02 to 0.7 ms of
system time to make, which on a cold why-build of 1,700 paths was half the
run (docs/engineering/speed.md). A row holds the text the server sent, keyed
by the cache (a digest of its URL, which may carry credentials) and the hash
part; the caller checks it again on every read. Lookups are one query on the
primary key; writes go in transactions of up to BATCH rows, on a thread of
their own while a walk runs, so the write lock is held for milliseconds.

Runs at the same time share the file: WAL mode, so readers never wait for a
writer, and a busy timeout for writers. A database that cannot be opened,
read or written (a read-only directory, a file that is not a database, a
lock held past the timeout) only makes the run slower: what cannot be read
is fetched, what cannot be written is not kept.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from urllib.parse import quote

FILE = "narinfo-v1.sqlite"  # a new layout gets a new name, never a migration
BATCH = 256
BUSY_TIMEOUT = 2.0  # seconds a writer waits for another run's transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS narinfo (
    cache TEXT NOT NULL,
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (cache, hash)
) WITHOUT ROWID
"""


def _connect(path: str, mode: str) -> sqlite3.Connection:
    # Autocommit (isolation_level=None): each lookup is its own read transaction, so none stays
    # open to hold back another run's checkpoint; writes say BEGIN themselves.
    return sqlite3.connect(f"file:{quote(path)}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT,
                           isolation_level=None, check_same_thread=False)


class KeptNarinfos:
    def __init__(self, cache_dir: str, url: str, file: str = FILE):
        """`file`: another database of the same layout (survey's results, keyed by their own digests)."""
        self.path = os.path.join(cache_dir, file)
        self.cache = hashlib.sha256(url.encode()).hexdigest()[:20]
        # A database that is not there yet holds nothing: a cold run looks nothing up.
        self._readable = os.path.exists(self.path)
        self._writable = True
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._pending: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._behind: ThreadPoolExecutor | None = None

    def get(self, key: str) -> str | None:
        """The kept text of the narinfo of hash part `key`, or None."""
        if not self._readable:
            return None
        try:
            if self._reader is None:
                self._reader = _connect(self.path, "rw")
            rows = self._reader.execute("SELECT text FROM narinfo WHERE cache = ? AND hash = ?",
                                        (self.cache, key)).fetchall()
        except sqlite3.Error:
            self._readable = False  # unreadable once is unreadable for the run: fetch instead
            return None
        return rows[0][0] if rows else None

    def keep(self, key: str, text: str) -> None:
        with self._lock:
            if not self._writable:
                return
            self._pending.append((self.cache, key, text))
            if self._behind is not None and len(self._pending) < BATCH:
                return
            batch, self._pending = self._pending, []
        if self._behind is not None:
            self._behind.submit(self._write, batch)
        else:
            self._write(batch)

    @contextmanager
    def writing_behind(self):
        """While a walk runs, what it fetched is written on a thread of its
        own, all of it before this returns."""
        self._behind = ThreadPoolExecutor(1, thread_name_prefix="narinfo-cache")
        try:
            yield
        finally:
            with self._lock:
                batch, self._pending = self._pending, []
            if batch:
                self._behind.submit(self._write, batch)
            self._behind.shutdown()
            self._behind = None

    def _write(self, batch: list[tuple[str, str, str]]) -> None:
        if not self._writable:  # a batch queued before an earlier one failed
            return
        try:
            if self._writer is None:
                self._writer = self._create()
            self._writer.execute("BEGIN IMMEDIATE")
            try:
                self._writer.executemany("INSERT OR REPLACE INTO narinfo VALUES (?, ?, ?)", batch)
                self._writer.execute("COMMIT")
            except BaseException:
                self._writer.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError):
            self._writable = False  # not kept: the next run fetches it again

    def _create(self) -> sqlite3.Connection:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        db = _connect(self.path, "rwc")
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a cache: a power cut may lose the last walk, never the file
            db.execute(SCHEMA)
        except sqlite3.Error:
            db.close()
            raise
        return db

    def close(self) -> None:
        for db in (self._reader, self._writer):
            if db is not None:
                db.close()
        self._reader = self._writer = None
