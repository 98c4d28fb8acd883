"""loader/dlopen.py read_opened: the reading half of what objects open. It
reads the names of every object of the load chains the loader descends into
once, taking those already read beside the walk as they are; the judge
(findings/opened.py) gets only its records."""

from __future__ import annotations

import pytest

from closure_audit.elf.reader import read_elf
from closure_audit.elf.strings import NameString, read_names
from closure_audit.loader import dlopen
from closure_audit.loader.environment import Environment, default_host_dirs
from closure_audit.loader.model import Loader

pytestmark = pytest.mark.fhs

OPENER = "static const char *names[] = { %s };\nconst char *name(int i) { return names[i]; }\n"


def tree(build):
    """bin/app needs lib/libopener.so.1, which names two libraries it opens;
    both need the host's C library, a leaf the loader does not descend into."""
    lib = build.lib("lib/libopener.so.1", code=OPENER % '"libnvrtc.so.13", "libmystery.so.4"')
    exe = build.exe("bin/app", links=[lib], runpath=["$ORIGIN/../lib"])
    loader = Loader(Environment(mode="tree", tree_roots=(str(build.root),), host_dirs=default_host_dirs()))
    chain = loader.chain(str(exe), read_elf(str(exe)))
    return str(exe), str(lib), chain


def test_every_object_the_loader_descends_into_is_read_once(build):
    exe, lib, chain = tree(build)
    leaves = [o.real for o in chain.objects if o.leaf]
    assert leaves and all(not p.startswith(str(build.root)) for p in leaves)  # the host's libc
    opened = dlopen.read_opened([chain, chain])
    assert set(opened.requests) == {exe, lib} and opened.problems == []
    assert [r.name for r in opened.requests[lib]] == ["libnvrtc.so.13", "libmystery.so.4"]
    assert opened.requests[exe] == []
    assert opened.bytes_scanned == read_names(exe)[1] + read_names(lib)[1] > 0


def test_names_read_beside_the_walk_are_taken_as_they_are(build):
    """What the walk's NameReader gave is used, not read again; a path no
    chain loads is left out; a file that could not be read is a problem."""
    exe, lib, chain = tree(build)
    given = {lib: ([NameString(offset=0x40, text="libcufft.so.12", section=".rodata")], 7),
             "/elsewhere/libother.so": ([NameString(offset=0, text="libcuda.so.1", section=".rodata")], 1000)}
    opened = dlopen.read_opened([chain], given)
    assert [(r.name, r.offset) for r in opened.requests[lib]] == [("libcufft.so.12", 0x40)]
    assert "/elsewhere/libother.so" not in opened.requests
    assert opened.bytes_scanned == 7 + read_names(exe)[1]
    opened = dlopen.read_opened([chain], {lib: "unreadable: Permission denied"})
    assert opened.problems == [(lib, "unreadable: Permission denied")] and opened.requests[lib] == []


def test_a_driver_library_is_classed_by_the_policys_list(build):
    exe, lib, chain = tree(build)
    opened = dlopen.read_opened([chain], driver_libraries=("libmystery.so*",))
    assert {r.name: r.klass for r in opened.requests[lib]} == {"libnvrtc.so.13": "toolkit",
                                                               "libmystery.so.4": "driver"}
