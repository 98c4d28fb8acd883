"""The load chains of a set of ELF files: which objects start a chain, and
every chain the loader model resolves from them.

Which objects start a chain: every loadable ELF file that no other file of
the set loads (executables, Python extension modules, plugins), plus any left
unreached (cycles). A library is judged inside the chains that load it, so a
need it leaves to an earlier object of the chain (as NVIDIA's libraries do) is
satisfied as in a real process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..elf.reader import ElfFile
from .model import Chain, LoadedObject, Loader


@dataclass
class Resolved:
    entry_points: list[str]
    chains: list[Chain]
    providers: dict[str, list[str]]  # file name or SONAME -> every file seen under it


def _loadable(elf: dict[str, ElfFile]) -> list[str]:
    return sorted(p for p, e in elf.items() if e.loadable and e.has_dynamic)


def entry_points(loader: Loader, elf: dict[str, ElfFile]) -> list[str]:
    loadable = set(_loadable(elf))
    loaded_by_others: set[str] = set()
    for path in loadable:
        obj = LoadedObject(path, path, elf[path], None)
        dirs = loader.search_path(obj, obj)
        for name in elf[path].needed:
            res = loader.find(name, dirs, elf[path].abi_key())
            if res.path is not None:
                real = loader.realpath(res.path)
                if real != path and real in loadable:
                    loaded_by_others.add(real)
    return sorted(loadable - loaded_by_others)


def resolve(loader: Loader, elf: dict[str, ElfFile]) -> Resolved:
    """Chains from every entry point, then from whatever they left unreached."""
    entries = entry_points(loader, elf)
    chains = [loader.chain(p, elf[p]) for p in entries]
    covered = {o.real for c in chains for o in c.objects}
    for path in _loadable(elf):
        if path not in covered:
            entries.append(path)
            chains.append(loader.chain(path, elf[path]))
            covered.update(o.real for o in chains[-1].objects)
    return Resolved(entries, chains, _providers(elf, chains))


def _providers(elf: dict[str, ElfFile], chains: list[Chain]) -> dict[str, list[str]]:
    """Every file the audit saw, by file name and by SONAME."""
    index: dict[str, set[str]] = {}
    objects = dict(elf)
    for chain in chains:
        for obj in chain.objects:
            objects.setdefault(obj.real, obj.elf)
    for path, e in objects.items():
        index.setdefault(os.path.basename(path), set()).add(path)
        if e.soname:
            index.setdefault(e.soname, set()).add(path)
    return {k: sorted(v) for k, v in index.items()}
