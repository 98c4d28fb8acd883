"""The loader model against glibc's real loader on this machine.

Each scenario builds real files with gcc, asks the model which file every
DT_NEEDED entry loads, and asks ld.so itself (LD_TRACE_LOADED_OBJECTS, the
mechanism behind ldd) the same question. Both must agree.
"""

from __future__ import annotations

import os
import struct
import subprocess

import pytest

from conftest import have
from closure_audit.loader import model as ld
from closure_audit.elf.reader import read_elf
from closure_audit.loader.environment import Environment, default_host_dirs, host_lib_token
from closure_audit.loader.model import Loader

pytestmark = pytest.mark.fhs


def tree_env(root, **kw) -> Environment:
    return Environment(mode="tree", tree_roots=(os.path.realpath(root),), host_dirs=default_host_dirs(), **kw)


def model(exe, env) -> dict[str, tuple[str, str | None]]:
    """needed name -> (how, path) over the whole chain, first occurrence."""
    real = os.path.realpath(exe)
    chain = Loader(env).chain(real, read_elf(real))
    out: dict[str, tuple[str, str | None]] = {}
    for obj in chain.objects:
        for res in obj.resolutions:
            out.setdefault(res.needed, (res.how, res.error or res.path))
    return out


def real_loader(exe) -> dict[str, str | None] | str:
    """What glibc loads for each name, or the fatal error it stops with."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env["LD_TRACE_LOADED_OBJECTS"] = "1"
    p = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=30)
    if "error while loading shared libraries" in p.stderr:
        return p.stderr.split("error while loading shared libraries: ", 1)[1].strip()
    out: dict[str, str | None] = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if " => " in line:
            name, rest = line.split(" => ", 1)
            out[name] = None if rest.startswith("not found") else rest.rsplit(" (", 1)[0]
        elif line.startswith("/"):  # a need given as a path, or the interpreter
            path = line.rsplit(" (", 1)[0]
            out[path] = path
    return out


def agree(exe, env, names) -> dict:
    """Assert model and ld.so agree on `names`; return the model's view."""
    m = model(exe, env)
    r = real_loader(exe)
    assert isinstance(r, dict), f"ld.so failed: {r}"
    for name in names:
        how, path = m[name]
        if how == ld.NOT_FOUND:
            assert r.get(name, "absent") is None, f"{name}: model says not found, ld.so loads {r.get(name)}"
        elif how != ld.ALREADY_LOADED:
            assert r[name] == path, f"{name}: model {path}, ld.so {r[name]}"
    return m


def test_runpath(build):
    a = build.lib("lib/libA.so")
    exe = build.exe("bin/prog", links=[a], runpath=["$ORIGIN/../lib"])
    m = agree(exe, tree_env(build.root), ["libA.so", "libc.so.6"])
    assert m["libA.so"] == ("runpath", str(build.root / "bin/../lib/libA.so"))
    assert m["libc.so.6"][0] == "default"


def test_rpath_is_inherited_down_the_chain(build):
    b = build.lib("d1/libB.so")
    a = build.lib("d2/libA.so", links=[b])  # no runpath of its own
    exe = build.exe("prog", links=[a], rpath=[str(build.root / "d1"), str(build.root / "d2")])
    m = agree(exe, tree_env(build.root), ["libA.so", "libB.so"])
    assert m["libB.so"][0] == "rpath"


def test_runpath_is_not_inherited(build):
    b = build.lib("d1/libB.so")
    a = build.lib("d2/libA.so", links=[b])
    exe = build.exe("prog", links=[a], runpath=[str(build.root / "d1"), str(build.root / "d2")])
    m = agree(exe, tree_env(build.root), ["libA.so", "libB.so"])
    assert m["libB.so"][0] == "not-found"


def test_own_runpath_disables_inherited_rpath(build):
    b = build.lib("d1/libB.so")
    a = build.lib("d2/libA.so", links=[b], runpath=["/nonexistent"])
    exe = build.exe("prog", links=[a], rpath=[str(build.root / "d1"), str(build.root / "d2")])
    m = agree(exe, tree_env(build.root), ["libB.so"])
    assert m["libB.so"][0] == "not-found"


def _add_runpath_tag(path):
    """Turn the executable's DT_DEBUG entry into a DT_RUNPATH naming the same
    string as its DT_RPATH: a file with both tags, which ld cannot write."""
    data = bytearray(path.read_bytes())
    e = read_elf(str(path))
    assert e.rpath is not None
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        dyn = next(s for s in ELFFile(f).iter_segments() if s["p_type"] == "PT_DYNAMIC")
        offset, size = dyn["p_offset"], dyn["p_filesz"]
    entries = [struct.unpack_from("<qQ", data, offset + i) for i in range(0, size, 16)]
    rpath_value = next(v for t, v in entries if t == 15)
    debug = next(i for i, (t, _v) in enumerate(entries) if t == 21)
    struct.pack_into("<qQ", data, offset + 16 * debug, 29, rpath_value)
    path.write_bytes(bytes(data))


def test_rpath_of_an_object_with_runpath_is_ignored_everywhere(build):
    b = build.lib("d1/libB.so")
    a = build.lib("d1/libA.so", links=[b])
    exe = build.exe("prog", links=[a], rpath=[str(build.root / "d1")])
    _add_runpath_tag(exe)
    e = read_elf(str(exe))
    assert e.rpath == e.runpath
    m = agree(exe, tree_env(build.root), ["libA.so", "libB.so"])
    # The executable's own need is found through its RUNPATH; libA cannot
    # inherit the executable's RPATH, because RUNPATH cancels it.
    assert m["libA.so"][0] == "runpath" and m["libB.so"][0] == "not-found"


def test_soname_already_loaded_satisfies_a_later_need(build):
    b = build.lib("d1/libB-1.2.so", soname="libB.so.1")
    a = build.lib("d2/libA.so", links=[b])  # libA needs libB.so.1 and cannot find it itself
    exe = build.exe("prog", links=[b, a], runpath=[str(build.root / "d1"), str(build.root / "d2")])
    build.patch(exe, "--replace-needed", "libB.so.1", "libB-1.2.so")
    m = agree(exe, tree_env(build.root), ["libB-1.2.so", "libA.so"])
    assert m["libB.so.1"][0] == "already-loaded"
    # Loaded in the other order, nothing provides it yet.
    exe2 = build.exe("prog2", links=[a, b], runpath=[str(build.root / "d2"), str(build.root / "d1")])
    build.patch(exe2, "--remove-needed", "libB.so.1")
    m2 = agree(exe2, tree_env(build.root), ["libA.so", "libB.so.1"])
    assert m2["libB.so.1"][0] == "not-found"


def test_wrong_class_and_machine_are_skipped(build):
    build.lib("d1/libB.so", m32=True)
    good = build.lib("d3/libB.so")
    if have("aarch64-linux-gnu-ld"):
        build.cross("d2/libB.so", "aarch64-linux-gnu")
    exe = build.exe("prog", links=[good], runpath=[str(build.root / d) for d in ("d1", "d2", "d3")])
    env = tree_env(build.root)
    agree(exe, env, ["libB.so"])
    real = os.path.realpath(exe)
    res = Loader(env).chain(real, read_elf(real)).root.resolutions[0]
    assert res.path == str(build.root / "d3/libB.so")
    assert [os.path.basename(os.path.dirname(p)) for p, _ in res.skipped][:1] == ["d1"]


def test_invalid_candidate_ends_the_search(build):
    good = build.lib("d2/libB.so")
    (build.root / "d1").mkdir()
    (build.root / "d1/libB.so").write_bytes(b"\x7fELF" + b"\0" * 8)
    exe = build.exe("prog", links=[good], runpath=[str(build.root / "d1"), str(build.root / "d2")])
    m = model(exe, tree_env(build.root))
    assert m["libB.so"][0] == "not-found" and "d1/libB.so" in m["libB.so"][1]
    assert str(build.root / "d1/libB.so") in real_loader(exe)


def test_origin_of_a_library_reached_through_a_symlink_is_the_link_directory(build):
    """Compile and run a program: glibc takes a library's $ORIGIN from the path
    it opened, not from the link's target. The model must do the same."""
    who = "const char *who(void) { return %s; }\n"
    real_dep = build.lib("real/libdep.so", code=who % '"next-to-real"')
    build.lib("link/libdep.so", code=who % '"next-to-link"')
    mid = build.lib("real/libmid.so", links=[real_dep], runpath=["$ORIGIN"],
                    code='const char *who(void); const char *mid(void) { return who(); }\n')
    os.symlink("../real/libmid.so", build.root / "link/libmid.so")
    exe = build.exe("bin/main", links=[mid], runpath=[str(build.root / "link")],
                    code='#include <stdio.h>\nconst char *mid(void);\nint main(void) { puts(mid()); return 0; }\n')
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "next-to-link"
    m = agree(exe, tree_env(build.root), ["libmid.so", "libdep.so"])
    assert m["libdep.so"][1] == str(build.root / "link/libdep.so")


def test_origin_of_an_executable_run_through_a_symlink_is_its_real_directory(build):
    who = "const char *who(void) { return %s; }\n"
    a = build.lib("A/libs/libdep.so", code=who % '"A"')
    build.lib("B/libs/libdep.so", code=who % '"B"')
    build.exe("A/prog", links=[a], runpath=["$ORIGIN/libs"],
              code='#include <stdio.h>\nconst char *who(void);\nint main(void) { puts(who()); return 0; }\n')
    os.symlink("../A/prog", build.root / "B/prog")
    out = subprocess.run([str(build.root / "B/prog")], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "A"
    m = model(build.root / "B/prog", tree_env(build.root))  # the model starts from the real path
    assert m["libdep.so"][1] == str(build.root / "A/libs/libdep.so")


@pytest.mark.parametrize("form", ["$ORIGIN/sub", "${ORIGIN}/sub"])
def test_origin_forms(build, form):
    a = build.lib("bin/sub/libA.so")
    exe = build.exe("bin/prog", links=[a], runpath=[form])
    m = agree(exe, tree_env(build.root), ["libA.so"])
    assert m["libA.so"][0] == "runpath"


def test_origin_is_a_token_only_before_a_slash_or_the_end(build):
    env = tree_env(build.root)
    lib = build.lib("x/libA.so", runpath=["$ORIGINAL/q"])
    obj = ld.LoadedObject(str(lib), str(lib), read_elf(str(lib)), None)
    loader = Loader(env)
    assert loader.expand(obj, "$ORIGINAL/q") == "$ORIGINAL/q"
    assert loader.expand(obj, "${ORIGIN}AL/q") == str(build.root / "x") + "AL/q"


def test_lib_token_matches_this_host(build):
    token = host_lib_token(read_elf("/bin/sh"))
    a = build.lib(f"pfx/{token}/libA.so")
    exe = build.exe("pfx/prog", links=[a], runpath=["$ORIGIN/$LIB"])
    m = agree(exe, tree_env(build.root), ["libA.so"])
    assert m["libA.so"][0] == "runpath"


def test_platform_token_uses_the_configured_name(build):
    a = build.lib("p/x86_64/libA.so")
    exe = build.exe("p/prog", links=[a], runpath=["$ORIGIN/$PLATFORM", "${ORIGIN}/${PLATFORM}/"])
    m = model(exe, tree_env(build.root, platform_token="x86_64"))
    assert m["libA.so"] == ("runpath", str(build.root / "p/x86_64/libA.so"))
    m = model(exe, tree_env(build.root, platform_token="haswell"))
    assert m["libA.so"][0] == "not-found"


def test_nodefaultlib_skips_the_host(build):
    exe = build.exe("prog", nodeflib=True, runpath=["/nonexistent"])
    m = model(exe, tree_env(build.root))
    assert m["libc.so.6"][0] == "not-found"
    r = real_loader(exe)
    assert isinstance(r, dict) and r.get("libc.so.6") is None


def test_empty_and_relative_entries_are_never_searched(build, monkeypatch):
    a = build.lib("d/libA.so")
    exe = build.exe("prog", links=[a], runpath=["", "d"])
    monkeypatch.chdir(build.root)  # even where the working directory would hold it
    m = model(exe, tree_env(build.root))
    assert m["libA.so"][0] == "not-found"


def test_needed_with_a_slash_is_opened_as_a_path(build):
    a = build.lib("d/libA.so")
    exe = build.exe("prog", links=[a])
    build.patch(exe, "--replace-needed", "libA.so", str(a))
    m = agree(exe, tree_env(build.root), [str(a)])
    assert m[str(a)] == ("path", str(a))


def test_ambiguous_runpath_candidates(build):
    a1 = build.lib("d1/libA.so", code="int v = 1;\n")
    build.lib("d2/libA.so", code="int v = 2;\n")
    same = build.lib("d1/libS.so")
    os.makedirs(build.root / "d2", exist_ok=True)
    (build.root / "d2/libS.so").write_bytes(same.read_bytes())
    exe = build.exe("prog", links=[a1, same], runpath=[str(build.root / "d1"), str(build.root / "d2")])
    real = os.path.realpath(exe)
    root = Loader(tree_env(build.root)).chain(real, read_elf(real)).root
    by = {r.needed: r for r in root.resolutions}
    assert by["libA.so"].shadowed == [str(build.root / "d2/libA.so")]
    assert by["libS.so"].shadowed == []  # identical copies are not ambiguous


def test_driver_libraries(build):
    stub_dir = build.root / "stubs"
    build.lib("stubs/libcuda.so.1", soname="libcuda.so.1")
    exe = build.exe("prog", links=[stub_dir / "libcuda.so.1"], runpath=["/run/opengl-driver/lib"])
    # Tree mode: the driver comes from the host's driver install.
    assert model(exe, tree_env(build.root))["libcuda.so.1"][0] == "driver"
    # Through a stubs directory in the runpath, the stub is what loads.
    exe2 = build.exe("prog2", links=[stub_dir / "libcuda.so.1"], runpath=[str(stub_dir)])
    assert model(exe2, tree_env(build.root))["libcuda.so.1"] == ("runpath", str(stub_dir / "libcuda.so.1"))
    nix = Environment(mode="nix-store", store_dir=str(build.root))
    assert model(exe, nix)["libcuda.so.1"][0] == "driver"
    exe3 = build.exe("prog3", links=[stub_dir / "libcuda.so.1"], runpath=["/nonexistent"])
    assert model(exe3, nix)["libcuda.so.1"][0] == "not-found"


def test_nix_mode_is_hermetic(build):
    a = build.lib("store/aaaa-a/lib/libA.so")
    exe = build.exe("store/bbbb-b/bin/prog", links=[a], runpath=[str(build.root / "store/aaaa-a/lib")])
    nix = Environment(mode="nix-store", store_dir=str(build.root / "store"))
    m = model(exe, nix)
    assert m["libA.so"][0] == "runpath"
    # The interpreter is the host's here, outside this store: no default directory.
    assert m["libc.so.6"][0] == "not-found"
