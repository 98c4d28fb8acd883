"""findings/opened.py on its own: it takes the load chains and the requests
loader/dlopen.py read of their objects (read_opened), and judges each name
an object may open where the chain loads it. It reads no file: the verdicts
follow the records it is given."""

from __future__ import annotations

import os

import pytest

from closure_audit.elf.reader import read_elf
from closure_audit.elf.strings import NameString
from closure_audit.findings.collector import Findings
from closure_audit.findings.loading import FromHost
from closure_audit.findings.opened import judge_opened
from closure_audit.findings.policy import Policy
from closure_audit.loader import dlopen
from closure_audit.loader import model as ld
from closure_audit.loader.chains import resolve
from closure_audit.loader.environment import Environment, default_host_dirs
from closure_audit.loader.model import Loader

pytestmark = pytest.mark.fhs

# A library that names what it opens, the way the CUDA runtime inside cuBLAS does.
OPENER = "static const char *names[] = { %s };\nconst char *name(int i) { return names[i]; }\n"


def opener(build, rel, names, **kw):
    return build.lib(rel, code=OPENER % ", ".join(f'"{n}"' for n in names), **kw)


def chains_of(root, *files, mode="tree", host_dirs=None, **env):
    """The loader over `root` and the load chains of `files`, as the audit
    resolves them (loader/chains.py)."""
    env = Environment(mode=mode, tree_roots=(str(root),) if mode == "tree" else (),
                      host_dirs=default_host_dirs() if host_dirs is None else host_dirs, **env)
    loader = Loader(env)
    elf = {os.path.realpath(f): read_elf(os.path.realpath(f)) for f in files}
    return loader, resolve(loader, elf)


def judged(loader, resolved, opened, from_host=None, mode="tree"):
    findings = Findings(Policy(), mode)
    judge = judge_opened(loader, resolved, findings, opened, from_host)
    by_rule: dict[str, list] = {}
    for f in findings.sorted():
        by_rule.setdefault(f.rule, []).append(f)
    return judge, by_rule


def test_names_read_from_the_file_are_judged_where_the_chain_loads_them(build):
    present = build.lib("lib/libpresent.so.2")
    lib = opener(build, "lib/libopener.so.1", ["libpresent.so.2", "libnvrtc.so.13", "libmystery.so.4"],
                 runpath=["$ORIGIN"])
    loader, resolved = chains_of(build.root, lib)
    opened = dlopen.read_opened(resolved.chains)
    judge, rules = judged(loader, resolved, opened)
    rows = {r.name: r for r in judge.rows}
    assert (rows["libpresent.so.2"].how, rows["libpresent.so.2"].path, rows["libpresent.so.2"].inside) == (
        ld.RUNPATH, str(present), True)
    # NVRTC is part of the toolkit: found nowhere, the object fails where it opens it.
    (f,) = rules["unresolved-dlopen-library"]
    assert (f.file, f.severity, f.fields["needed"], f.fields["class"]) == (
        str(lib), "error", "libnvrtc.so.13", "toolkit")
    assert lib.read_bytes()[f.fields["offset"]:].startswith(b"libnvrtc.so.13\0")
    assert [x.fields["needed"] for x in rules["unknown-dlopen-library"]] == ["libmystery.so.4"]
    assert rules["unknown-dlopen-library"][0].severity != "error"
    assert set(rules) == {"unresolved-dlopen-library", "unknown-dlopen-library"}


def test_the_verdict_follows_the_records_not_the_file(build):
    """The same opener, judged from records that say it names other things:
    the judge never reads the file itself, so only the records count."""
    build.lib("lib/libpresent.so.2")
    lib = opener(build, "lib/libopener.so.1", ["libpresent.so.2"], runpath=["$ORIGIN"])
    loader, resolved = chains_of(build.root, lib)
    real = os.path.realpath(lib)
    said = [NameString(offset=0x123, text="libcublasLt.so.13", section=".rodata")]
    opened = dlopen.Opened({real: dlopen.requests(read_elf(real), said)}, [], 0)
    judge, rules = judged(loader, resolved, opened)
    assert [r.name for r in judge.rows] == ["libcublasLt.so.13"]
    (f,) = rules["unresolved-dlopen-library"]
    assert (f.fields["needed"], f.fields["offset"], f.fields["string"]) == ("libcublasLt.so.13", 0x123,
                                                                            "libcublasLt.so.13")
    # Nothing to open, and a file whose names could not be read: no row, one invalid-elf finding.
    opened = dlopen.Opened({real: []}, [(real, "unreadable: Permission denied")], 0)
    judge, rules = judged(loader, resolved, opened)
    assert judge.rows == [] and [(f.file, f.fields["reason"]) for f in rules["invalid-elf"]] == [
        (real, "unreadable: Permission denied")]


def test_a_toolkit_library_only_the_host_has_is_a_second_copy_from_the_host(build):
    """A tree's object opens NVRTC, which only a host directory holds: the
    judge hands it to FromHost (cuda-library-from-host), not unresolved."""
    host = build.lib("host/libnvrtc.so.13")
    lib = opener(build, "tree/lib/libopener.so.1", ["libnvrtc.so.13"], runpath=["$ORIGIN"])
    libc = [d for d in default_host_dirs() if os.path.exists(os.path.join(d, "libc.so.6"))]
    loader, resolved = chains_of(build.root / "tree", lib, host_dirs=(str(host.parent), *libc))
    from_host = FromHost()
    judge, rules = judged(loader, resolved, dlopen.read_opened(resolved.chains), from_host)
    (row,) = judge.rows
    assert (row.path, row.inside) == (str(host), False) and "unresolved-dlopen-library" not in rules
    findings = Findings(Policy(), "tree")
    from_host.report(findings)
    (f,) = findings.sorted()
    assert (f.rule, f.file, f.severity, f.fields["host_path"]) == ("cuda-library-from-host", str(lib), "error",
                                                                    str(host))
    assert [(o["file"], o["string"]) for o in f.fields["opened"]] == [(str(lib), "libnvrtc.so.13")]


def test_in_a_store_the_driver_needs_a_driver_directory_in_the_runpath(build, tmp_path):
    """In a Nix store an object that opens libcuda.so.1 finds it only through
    a driver directory in its own runpath (missing-driver-runpath); with one,
    nothing is wrong."""
    driver = tmp_path / "run/opengl-driver/lib"
    driver.mkdir(parents=True)
    without = opener(build, "nix/store/aaaa-without/lib/libopener.so.1", ["libcuda.so.1"])
    with_dir = opener(build, "nix/store/bbbb-with/lib/libopener.so.1", ["libcuda.so.1"], runpath=[str(driver)])
    store = build.root / "nix/store"
    loader, resolved = chains_of(store, without, with_dir, mode="nix-store", store_dir=str(store), host_dirs=(),
                                 driver_dirs=(str(driver),))
    judge, rules = judged(loader, resolved, dlopen.read_opened(resolved.chains), mode="nix-store")
    (f,) = rules["missing-driver-runpath"]
    assert (f.file, f.severity, f.fields["needed"]) == (str(without), "error", "libcuda.so.1")
    assert str(driver) in f.message
    assert str(with_dir) not in {x.file for fs in rules.values() for x in fs}
    assert {r.file: r.how for r in judge.rows} == {str(without): ld.NOT_FOUND, str(with_dir): ld.DRIVER}
