"""Evidence from a binary cache: the local scanner's answers (evidence.py),
read from NARs streamed out of the cache instead of files in the store.

Each referrer's NAR is streamed once: decompressed, hashed against its
narinfo's NarHash and NarSize, walked (nar.py), and every member searched
for the hash parts as it goes by (elf/stream.py). Only the context of each
hit and what the ELF reader needs stay in memory; nothing is written to disk.
The hits are then classified by the local scanner's own code, with file
names relative to the store path and offsets inside each file, as there.

Whether a runpath entry is used depends on the directories it names: the
loader model (loader/model.py) runs unchanged over a view of the store made
of NAR listings (StoreView), read through the file seam (NarFiles), so the NAR of a store path a runpath names is
streamed too, once, for its listing and the ELF headers of its libraries.
That happens only for ELF files with a hit inside a runpath.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..elf.files import HostFiles
from ..elf.reader import ElfFile, InvalidElf
from ..elf.stream import StreamedFile
from ..errors import ClosureError
from ..loader.environment import Environment
from ..loader.model import Loader
from ..nix.storepath import top_store_path
from .binary import BinaryCache
from ..closure.evidence import CONTEXT, Evidence, Scanner
from .nar import NarReader, decompressed
from ..modes import NIX_STORE

_MAX_PASSES = 8
_MAX_LINKS = 40


@dataclass
class StoreTree:
    """One store path as its NAR has it: every node by its path relative to
    the store path ("" is the store path itself)."""

    kinds: dict[str, str] = field(default_factory=dict)  # "directory", "regular" or "symlink"
    names: dict[str, set[str]] = field(default_factory=dict)  # a directory's entries
    targets: dict[str, bytes] = field(default_factory=dict)  # a symlink's target
    sizes: dict[str, int] = field(default_factory=dict)  # a regular file's size
    elf: dict[str, ElfFile | str | None] = field(default_factory=dict)  # facts, a parse error, or None: no ELF
    unsettled: set[str] = field(default_factory=set)  # ELF files whose parse was not finished


class StoreView:
    """Store paths of a closure, read from their NARs on demand."""

    def __init__(self, cache: BinaryCache, store_dir: str):
        self.cache = cache
        self.store_dir = store_dir
        self.trees: dict[str, StoreTree | None] = {}
        self.bytes_streamed = 0

    # -- streaming -----------------------------------------------------------------

    def walk(self, path: str, needles: tuple[bytes, ...] = (), settle: frozenset[str] = frozenset()
             ) -> tuple[StoreTree, dict[str, StreamedFile]]:
        """Stream the NAR of `path`: its tree, and the files holding a needle.
        ELF files with hits, and those named in `settle`, get their parse
        finished, with more passes where one is not enough. Every fault is a
        one-line ClosureError naming the path."""
        info = self.cache.narinfo(path)
        with self.cache.nar_faults(path, info):
            return self._walk(path, info, needles, settle)

    def _walk(self, path, info, needles, settle):
        tree = StoreTree()
        files: dict[str, StreamedFile] = {}
        unsettled: dict[str, StreamedFile] = {}
        for entry in self._entries(path, info):
            rel = entry.path
            tree.kinds[rel] = entry.type
            if rel:
                parent, _, name = rel.rpartition("/")
                tree.names.setdefault(parent, set()).add(name)
            if entry.type == "directory":
                tree.names.setdefault(rel, set())
            elif entry.type == "symlink":
                tree.targets[rel] = entry.target
            else:
                tree.sizes[rel] = entry.size
                sf = StreamedFile(entry.size, needles, CONTEXT)
                for piece in entry.chunks():
                    sf.feed(piece)
                sf.finish()
                if sf.hits:
                    files[rel] = sf
                if not sf.is_elf:
                    tree.elf[rel] = None
                elif sf.complete:
                    tree.elf[rel] = sf.elf if sf.elf is not None else sf.elf_error
                elif sf.hits or rel in settle:
                    unsettled[rel] = sf
                else:
                    tree.unsettled.add(rel)
        for _ in range(_MAX_PASSES):
            if not unsettled:
                break
            for sf in unsettled.values():
                sf.restart()
            for entry in self._entries(path, info):
                sf = unsettled.get(entry.path)
                if sf is not None:
                    for piece in entry.chunks():
                        sf.feed(piece)
                    sf.finish()
            for rel in [r for r, sf in unsettled.items() if sf.complete]:
                sf = unsettled.pop(rel)
                tree.elf[rel] = sf.elf if sf.elf is not None else sf.elf_error
        if unsettled:
            raise ClosureError(f"{path}: the ELF headers of {sorted(unsettled)[0]} in its NAR cannot be read "
                               f"in {_MAX_PASSES} passes")
        return tree, files

    def _entries(self, path: str, info):
        """The members of the NAR of `path`, checked against its narinfo once
        the walk is over."""
        with self.cache.transport.open(info.url) as raw:
            reader = NarReader(decompressed(raw, info.compression))
            yield from reader.entries()
            self.bytes_streamed += reader.source.size
            why = reader.check(info.nar_hash.digest, info.nar_size)
        if why is not None:
            raise ClosureError(f"{path}: its NAR {self.cache.url}/{info.url} is not the one its narinfo "
                               f"describes: {why}")

    # -- the view the loader model reads -----------------------------------------------

    def tree(self, path: str) -> StoreTree | None:
        if path not in self.trees:
            try:
                self.trees[path] = self.walk(path)[0]
            except ClosureError:
                if path in self.cache.known:
                    raise
                self.trees[path] = None  # a path outside the closure the cache does not have
        return self.trees[path]

    def elf(self, path: str, rel: str) -> ElfFile | str | None:
        tree = self.tree(path)
        if rel in tree.unsettled:
            settled, _ = self.walk(path, settle=frozenset({rel}))
            tree.elf[rel] = settled.elf[rel]
            tree.unsettled.discard(rel)
        return tree.elf.get(rel)

    def resolve(self, path: str) -> tuple[str, str] | str | None:
        """Follow symlinks as the kernel does: (store path, relative path) of
        what `path` names in the store, a path outside the store it leads
        to, or None when nothing is there."""
        parts = [p for p in path.split("/") if p and p != "."]
        done: list[str] = []
        links = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            done.append(part)
            current = "/" + "/".join(done)
            top = top_store_path(current, self.store_dir)
            if top is None:
                if (self.store_dir + "/").startswith(current + "/"):
                    continue  # /nix, /nix/store
                return "/" + "/".join(done + parts)
            tree = self.tree(top)
            if tree is None:
                return None
            rel = current[len(top) + 1:]
            kind = tree.kinds.get(rel)
            if kind is None:
                return None
            if kind == "symlink":
                links += 1
                if links > _MAX_LINKS:
                    return None
                target = tree.targets[rel].decode("utf-8", "surrogateescape")
                base = done[:-1] if not target.startswith("/") else []
                parts = [p for p in target.split("/") if p and p != "."] + parts
                done = base
                continue
            if kind != "directory" and parts:
                return None
        current = "/" + "/".join(done)
        top = top_store_path(current, self.store_dir)
        if top is None:
            return current
        return top, current[len(top) + 1:]


class NarFiles(HostFiles):
    """The file seam (elf/files.py) over a StoreView: store paths are read
    from their NARs, anything outside the store from this machine, as
    locally. The loader model runs over it unchanged. A NAR's contents are
    not kept: same_contents compares the local copies, where there are any."""

    def __init__(self, view: StoreView):
        self.view = view

    def _locate(self, path: str):
        """What StoreView.resolve says of a path in the store; a path outside
        it as it is."""
        return self.view.resolve(path) if path.startswith(self.view.store_dir.rstrip("/") + "/") else path

    def realpath(self, path: str) -> str:
        where = self._locate(path)
        if where is None or isinstance(where, str):
            return super().realpath(where or path)
        return f"{where[0]}/{where[1]}" if where[1] else where[0]

    def listdir(self, directory: str) -> frozenset[str] | None:
        where = self._locate(directory)
        if isinstance(where, str):
            return super().listdir(where)
        if where is not None:
            tree = self.view.tree(where[0])
            if tree.kinds.get(where[1]) == "directory":
                return frozenset(tree.names.get(where[1], ()))
        return None

    def identity(self, path: str) -> tuple[tuple, bool] | None:
        where = self._locate(path)
        if where is None or isinstance(where, str):
            return None if where is None else super().identity(where)
        return where, self.view.tree(where[0]).kinds[where[1]] == "regular"

    def read_elf(self, path: str) -> ElfFile | None:
        where = self._locate(path)
        if isinstance(where, str):
            return super().read_elf(where)
        facts = self.view.elf(*where)
        if isinstance(facts, str):
            raise InvalidElf(facts)
        return facts


class CacheScanner(Scanner):
    """The evidence scanner for a closure read with --store."""

    SILENT = "its NAR holds no reference to it"

    def __init__(self, cache: BinaryCache, store_dir: str):
        self.view = StoreView(cache, store_dir)
        super().__init__(store_dir, workers=1,
                         loader=Loader(Environment(mode=NIX_STORE, store_dir=store_dir),
                                       files=NarFiles(self.view)))

    def scan_all(self, wanted: dict[str, dict[str, str]]) -> dict[str, dict[str, Evidence]]:
        found = {r: {path: Evidence() for path in targets.values()} for r, targets in wanted.items()}
        for referrer, targets in wanted.items():
            needles = [(h.encode(), targets[h]) for h in sorted(targets)]
            tree, files = self.view.walk(referrer, tuple(n for n, _ in needles))
            self.view.trees.setdefault(referrer, tree)
            for rel in sorted(tree.targets):
                self._symlink(tree.targets[rel], rel, needles, found[referrer])
            self.bytes_scanned += sum(tree.sizes.values())
            for rel in sorted(files):
                sf = files[rel]
                path = f"{referrer}/{rel}" if rel else referrer
                self._classify(path, rel, sf.data, sf.size,
                               [(pos, needles[i][1]) for pos, i in sorted(sf.hits)], found[referrer])
        self._mark_silent(found)
        return found


class Unscanned(Scanner):
    """Evidence left unread: the NARs are not streamed unless asked for."""

    def __init__(self, store_dir: str, why: str):
        super().__init__(store_dir, workers=1)
        self.why = why

    def scan_all(self, wanted: dict[str, dict[str, str]]) -> dict[str, dict[str, Evidence]]:
        return {r: {p: Evidence(unavailable=self.why) for p in t.values()} for r, t in wanted.items()}


def read_closure(cache: BinaryCache, roots: list[str], evidence: bool):
    """The closure of `roots` in the cache; its evidence is streamed from the
    NARs when `evidence`, else marked as not read."""
    closure = cache.closure(roots)
    if evidence:
        closure.scanner = lambda: CacheScanner(cache, closure.store_dir)
    else:
        closure.scanner = lambda: Unscanned(closure.store_dir, "not streamed from the binary cache "
                                                                 "(pass --evidence)")
    return closure
