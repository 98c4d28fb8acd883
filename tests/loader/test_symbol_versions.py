"""Symbol versions and undefined symbols: audit's verdict against the real
loader's (a dlopen with RTLD_NOW, an import), on objects gcc builds here,
in tree mode and in nix-store mode."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_matches_pyelftools, run_cli, shared_object as gcc
from nixstore import needs_nix, nix_build
from test_process_model import stack  # noqa: F401 (issue 29's synthetic CUDA 13 stack, a fixture)

from closure_audit.elf.reader import read_elf
from closure_audit.elf.symbols import Symbols
from closure_audit.elf.versions import Image, newest_of_family, read_versions

PROVIDER = "int foo1(void) { return 1; }\nint foo2(void) { return 2; }\n"
V12 = "V1 { global: foo1; local: *; };\nV2 { global: foo2; } V1;\n"
V1_ONLY = "V1 { global: foo1; foo2; local: *; };\n"
CONSUMER = "int foo2(void); int use(void) { return foo2(); }\n"
WEAK = "int foo2(void) __attribute__((weak)); int use(void) { return foo2 ? foo2() : 0; }\n"


def provider(out: Path, script: str) -> Path:
    vs = out.parent / f".{out.name}.map"
    out.parent.mkdir(parents=True, exist_ok=True)
    vs.write_text(script)
    gcc(out, PROVIDER, "-Wl,-soname,libp.so.1", f"-Wl,--version-script={vs}")
    vs.unlink()
    return out


def consumer(out: Path, lib: Path, source: str = CONSUMER, runpath: str = "$ORIGIN") -> Path:
    flags = ["-Wl,--no-as-needed", str(lib)]
    if runpath:
        flags.append(f"-Wl,--enable-new-dtags,-rpath,{runpath}")
    return gcc(out, source, *flags)


def make_weak(path: Path, version: str) -> None:
    """Mark the Vernaux entry of `version` VER_FLG_WEAK, as ld does where
    every reference to it is weak (binutils 2.40 does not)."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".gnu.version_r")
        offset = sec["sh_offset"]
        data = sec.data()
    at = 0
    while True:
        _v, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", data, at)
        a = at + aux
        for _ in range(cnt):
            _h, _flags, _other, name, anext = struct.unpack_from("<IHHII", data, a)
            with open(path, "rb") as f:
                f.seek(elf_strtab(path) + name)
                got = f.read(len(version) + 1)
            if got == version.encode() + b"\0":
                with open(path, "r+b") as f:
                    f.seek(offset + a + 4)
                    f.write((2).to_bytes(2, "little"))
                assert_matches_pyelftools(str(path))
                return
            a += anext
        if not nxt:
            raise AssertionError(f"no Vernaux entry {version}")
        at += nxt


def elf_strtab(path: Path) -> int:
    with open(path, "rb") as f:
        return ELFFile(f).get_section_by_name(".dynstr")["sh_offset"]


def dlopen(path: Path, env: dict | None = None, preload: Path | None = None) -> str:
    """The real loader's answer: '' when dlopen with RTLD_NOW succeeds, else its error."""
    code = ("import ctypes, sys\n"
            + (f"ctypes.CDLL({str(preload)!r}, mode=ctypes.RTLD_GLOBAL)\n" if preload else "")
            + f"try:\n  ctypes.CDLL({str(path)!r}, mode=2)\nexcept OSError as e:\n  print(e)\n")
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                          check=True).stdout.strip()


def audit(*args: str) -> dict:
    p = run_cli("audit", "--json", *args)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def rule(report: dict, name: str) -> list[dict]:
    return [f for f in report["findings"] if f["rule"] == name]


# -- the readers, against pyelftools ------------------------------------------------


def test_version_tables_match_pyelftools(tmp_path):
    lib = provider(tmp_path / "lib/libp.so.1", V12)
    use = consumer(tmp_path / "lib/libc.so", lib)
    with open(lib, "rb") as f:
        verdef = ELFFile(f).get_section_by_name(".gnu.version_d")
        theirs_defined = {next(aux).name for _d, aux in verdef.iter_versions()}
    with open(use, "rb") as f:
        verneed = ELFFile(f).get_section_by_name(".gnu.version_r")
        theirs_required = {(v.name, a.name) for v, auxes in verneed.iter_versions() for a in auxes}
    ours = read_versions(Image.open(None, str(lib), read_elf(str(lib))))
    assert ours.defined == theirs_defined == {"libp.so.1", "V1", "V2"}
    used = read_versions(Image.open(None, str(use), read_elf(str(use))))
    assert {(r.file, r.version) for r in used.required} == theirs_required
    assert ("libp.so.1", "V2") in theirs_required


@pytest.mark.parametrize("table", ["DT_GNU_HASH", "DT_HASH"])
def test_symbol_lookup_matches_pyelftools(tmp_path, table):
    """Every defined dynamic symbol pyelftools lists is found through the
    hash table (the C library's math library: DT_GNU_HASH; a build with
    only DT_HASH), and the undefined ones are those it lists undefined."""
    lib = gcc(tmp_path / "libm.so", "#include <math.h>\ndouble f(double x) { return sin(x) + cos(x); }\n"
              + PROVIDER, "-lm", f"-Wl,--hash-style={'gnu' if table == 'DT_GNU_HASH' else 'sysv'}")
    if table == "DT_GNU_HASH" and Path("/lib/x86_64-linux-gnu/libm.so.6").exists():
        lib = Path("/lib/x86_64-linux-gnu/libm.so.6")
    from closure_audit.loader.symbols import name_hash

    elf = read_elf(str(lib))
    image = Image.open(None, str(lib), elf)
    table = Symbols(str(lib), image, read_versions(image), elf.elf_class)
    with open(lib, "rb") as f:
        theirs = ELFFile(f)
        syms = list(theirs.get_section_by_name(".dynsym").iter_symbols())
        versym = theirs.get_section_by_name(".gnu.version")
        ndx = [versym.get_symbol(i).entry["ndx"] for i in range(len(syms))]  # a name for 0 and 1
        hidden = [isinstance(n, int) and bool(n & 0x8000) for n in ndx]
    assert table.count() == len(syms)
    defined = [s.name for s, h in zip(syms, hidden) if s["st_shndx"] != "SHN_UNDEF" and s["st_value"]
               and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK") and not h]
    assert defined and all(table.defines(n, None, name_hash(n)) for n in defined)
    undefined = {s.name for s in syms[1:] if s["st_shndx"] == "SHN_UNDEF" and s["st_info"]["bind"] == "STB_GLOBAL"}
    assert {n for n, _v, _need in table.undefined()} == undefined
    assert not table.defines("nixcuda_no_such_symbol", None, name_hash("nixcuda_no_such_symbol"))


def test_newest_of_family():
    defined = {"GLIBCXX_3.4", "GLIBCXX_3.4.9", "GLIBCXX_3.4.30", "CXXABI_1.3", "libstdc++.so.6"}
    assert newest_of_family("GLIBCXX_3.4.32", defined) == "GLIBCXX_3.4.30"
    assert newest_of_family("CXXABI_1.3.15", defined) == "CXXABI_1.3"
    assert newest_of_family("libcudart.so.12", {"libcudart.so.13"}) == "libcudart.so.13"
    assert newest_of_family("V2", {"W1"}) is None


# -- versions, tree mode ------------------------------------------------------------


def test_version_present_loads(tmp_path):
    tree = tmp_path / "tree"
    use = consumer(tree / "lib/libuse.so", provider(tree / "lib/libp.so.1", V12))
    assert dlopen(use) == ""
    assert not rule(audit("--root", str(tree), str(tree)), "symbol-version-missing")


def test_provider_swapped_for_v1_only(tmp_path):
    tree = tmp_path / "tree"
    use = consumer(tree / "lib/libuse.so", provider(tree / "lib/libp.so.1", V12))
    provider(tree / "lib/libp.so.1", V1_ONLY)
    assert "version `V2' not found" in dlopen(use)
    report = audit("--root", str(tree), str(tree))
    (f,) = rule(report, "symbol-version-missing")
    assert (f["file"], f["needed"], f["version"], f["newest"]) == (str(use), "libp.so.1", "V2", "V1")
    assert f["severity"] == "error" and f["provider"] == str(tree / "lib/libp.so.1")


def test_weak_version_reference_loads(tmp_path):
    tree = tmp_path / "tree"
    use = consumer(tree / "lib/libuse.so", provider(tree / "lib/libp.so.1", V12), WEAK)
    make_weak(use, "V2")
    provider(tree / "lib/libp.so.1", V1_ONLY)
    assert dlopen(use) == ""
    assert not rule(audit("--root", str(tree), str(tree)), "symbol-version-missing")


def test_host_only_provider(tmp_path):
    """The need resolves on the host (the policy's host directories; the
    real loader's: LD_LIBRARY_PATH), whose copy lacks the version."""
    tree, host = tmp_path / "tree", tmp_path / "host"
    use = consumer(tree / "lib/libuse.so", provider(tmp_path / "build/libp.so.1", V12), runpath="")
    provider(host / "libp.so.1", V1_ONLY)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[host]\ndirectories = ["{host}"]\n')
    assert "version `V2' not found" in dlopen(use, {"LD_LIBRARY_PATH": str(host)})
    (f,) = rule(audit("--policy", str(policy), "--root", str(tree), str(tree)), "symbol-version-missing")
    assert f["provider"] == str(host / "libp.so.1") and f["newest"] == "V1"
    provider(host / "libp.so.1", V12)
    assert dlopen(use, {"LD_LIBRARY_PATH": str(host)}) == ""
    assert not rule(audit("--policy", str(policy), "--root", str(tree), str(tree)), "symbol-version-missing")


# -- undefined symbols ----------------------------------------------------------------

MODULE = """
#include <Python.h>
int bar(void);
static PyObject *call(PyObject *self, PyObject *args) { return PyLong_FromLong(bar()); }
static PyMethodDef methods[] = {{"call", call, METH_NOARGS, ""}, {0}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "mod", 0, -1, methods};
PyMODINIT_FUNC PyInit_mod(void) { return PyModule_Create(&def); }
"""


def extension(tree: Path) -> tuple[Path, Path]:
    """site-packages/pkg/mod.so needs bar, which only pkg/libbar.so defines
    and which it does not name in DT_NEEDED: it imports only after libbar
    is loaded with RTLD_GLOBAL (as frameworks preload their libraries)."""
    pkg = tree / "lib/python3/site-packages/pkg"
    bar = gcc(pkg / "libbar.so", "int bar(void) { return 7; }\n")
    mod = gcc(pkg / "mod.so", MODULE, f"-I{sysconfig.get_paths()['include']}")
    return mod, bar


def import_mod(mod: Path, preload: Path | None = None) -> subprocess.CompletedProcess:
    code = (f"import ctypes, sys; sys.path.insert(0, {str(mod.parent)!r})\n"
            + (f"ctypes.CDLL({str(preload)!r}, mode=ctypes.RTLD_GLOBAL)\n" if preload else "")
            + "import mod; print(mod.call())")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_undefined_symbol_met_only_after_a_preload(tmp_path):
    tree = tmp_path / "venv"
    mod, bar = extension(tree)
    plain, preloaded = import_mod(mod), import_mod(mod, bar)
    assert "undefined symbol: bar" in plain.stderr
    assert preloaded.returncode == 0 and preloaded.stdout.strip() == "7"
    report = audit("--symbols", "--root", str(tree), str(tree))
    (f,) = rule(report, "undefined-symbol")
    assert (f["file"], f["symbol"], f["provider"], f["severity"]) == (str(mod), "bar", str(bar), "error")
    assert f"loads only after {bar} is loaded" in f["message"]
    # Without --symbols, nothing is said; with the need written down, nothing is wrong.
    assert not rule(audit("--root", str(tree), str(tree)), "undefined-symbol")


def test_undefined_symbols_none_where_imports_work(tmp_path):
    """An extension module whose needs define its symbols, and Python's own
    symbols from the interpreter: no finding, and the import works."""
    tree = tmp_path / "venv"
    pkg = tree / "lib/python3/site-packages/pkg"
    bar = gcc(pkg / "libbar.so", "int bar(void) { return 7; }\n", "-Wl,-soname,libbar.so")
    gcc(pkg / "mod.so", MODULE, f"-I{sysconfig.get_paths()['include']}", "-Wl,--no-as-needed", str(bar),
        "-Wl,-rpath,$ORIGIN")
    assert import_mod(pkg / "mod.so").stdout.strip() == "7"
    assert not rule(audit("--symbols", "--root", str(tree), str(tree)), "undefined-symbol")


def test_bind_now_library_with_a_missing_versioned_symbol(tmp_path):
    """-z now: the object's undefined symbols bind at load; foo2@V2 where
    the provider's foo2 is V1 is undefined (the version check passes by a
    weak reference, the symbol does not)."""
    tree = tmp_path / "tree"
    lib = provider(tree / "lib/libp.so.1", V12)
    use = gcc(tree / "lib/libuse.so", CONSUMER, "-Wl,-z,now", "-Wl,--no-as-needed", str(lib),
              "-Wl,--enable-new-dtags,-rpath,$ORIGIN")
    make_weak(use, "V2")
    provider(tree / "lib/libp.so.1", V1_ONLY)
    assert "undefined symbol: foo2, version V2" in dlopen(use)
    report = audit("--symbols", "--root", str(tree), str(tree))
    assert not rule(report, "symbol-version-missing")
    (f,) = rule(report, "undefined-symbol")
    assert (f["symbol"], f["version"]) == ("foo2", "V2")


# -- nix-store mode ---------------------------------------------------------------------

NIX = r"""
let
  provider = name: script: sh name ''
    mkdir -p $out/lib
    printf '%s' '${script}' > v.map
    printf 'int foo1(void) { return 1; }\nint foo2(void) { return 2; }\n' > p.c
    gcc -shared -fPIC -o $out/lib/libp.so.1 p.c -Wl,-soname,libp.so.1 -Wl,--version-script=v.map
  '';
  p12 = provider "fixture-p12" "V1 { global: foo1; local: *; }; V2 { global: foo2; } V1;";
  p1 = provider "fixture-p1" "V1 { global: foo1; foo2; local: *; };";
  use = name: at: sh name ''
    mkdir -p $out/lib
    echo 'int foo2(void); int use(void) { return foo2(); }' > c.c
    gcc -shared -fPIC -o $out/lib/libuse.so c.c -L${p12}/lib -l:libp.so.1 -Wl,-rpath,${at}/lib
  '';
  # The V2 reference marked VER_FLG_WEAK in the builder, as make_weak does.
  weak = sh "fixture-use-weak" ''
    mkdir -p $out/lib
    echo 'int foo2(void) __attribute__((weak)); int use(void) { return foo2 ? foo2() : 0; }' > c.c
    gcc -shared -fPIC -o $out/lib/libuse.so c.c -Wl,--no-as-needed -L${p12}/lib -l:libp.so.1 \
      -Wl,-rpath,${p1}/lib
    sec=$(readelf -SW $out/lib/libuse.so | sed -n 's/.*[.]gnu[.]version_r *VERNEED *[0-9a-f]* \([0-9a-f]*\).*/\1/p')
    at=$(readelf -VW $out/lib/libuse.so | sed -n 's/^ *0x\([0-9a-f]*\): *Name: V2 .*/\1/p')
    printf '\002' | dd of=$out/lib/libuse.so bs=1 seek=$((0x$sec + 0x$at + 4)) conv=notrunc 2>/dev/null
  '';
in { good = use "fixture-use-good" p12; bad = use "fixture-use-bad" p1; inherit weak; }
"""


@needs_nix
@pytest.mark.parametrize("which", ["good", "bad", "weak"])
def test_versions_in_the_store(tmp_path, which):
    (out,) = nix_build(tmp_path, NIX, which)
    lib = Path(out) / "lib/libuse.so"
    loader = dlopen(lib)
    found = rule(audit(out), "symbol-version-missing")
    if which != "bad":
        assert loader == "" and not found
    else:
        assert "version `V2' not found" in loader
        (f,) = found
        assert f["version"] == "V2" and f["newest"] == "V1" and f["provider"].endswith("-fixture-p1/lib/libp.so.1")


@needs_nix
def test_undefined_symbol_in_the_store(tmp_path):
    """An extension module in the store that needs a symbol only a library
    it does not name defines: the import fails, after a preload it works,
    and audit --symbols names the library."""
    include = sysconfig.get_paths()["include"]
    source = tmp_path / "mod.c"
    source.write_text(MODULE)
    body = f"""
    {{
      bar = clib "fixture-libbar" "libbar.so" "int bar(void) {{ return 7; }}" "";
      mod = clib "fixture-mod" "mod.so" (builtins.readFile {source}) "-I{include}";
    }}
    """
    (bar,) = nix_build(tmp_path, body, "bar")
    (mod,) = nix_build(tmp_path, body, "mod")
    module, library = Path(mod) / "lib/mod.so", Path(bar) / "lib/libbar.so"
    assert "undefined symbol: bar" in import_mod(module).stderr
    assert import_mod(module, library).stdout.strip() == "7"
    (f,) = rule(audit("--symbols", mod, bar), "undefined-symbol")
    assert (f["file"], f["symbol"], f["provider"]) == (str(module), "bar", str(library))
    assert not rule(audit("--symbols", bar), "undefined-symbol")


def test_version_of_a_name_already_loaded(tmp_path):
    """libroot.so loads the V1-only libp.so.1 first; libuse.so's own RUNPATH
    holds a copy with V2, but the name is already loaded: glibc checks V2
    against the loaded file and refuses, and so does the audit."""
    tree = tmp_path / "tree"
    new = provider(tree / "new/libp.so.1", V12)
    old = provider(tree / "old/libp.so.1", V1_ONLY)
    use = consumer(tree / "new/libuse.so", new)
    root = gcc(tree / "libroot.so", "int root(void) { return 0; }\n", "-Wl,--no-as-needed", str(old), str(use),
               "-Wl,--enable-new-dtags,-rpath,$ORIGIN/old:$ORIGIN/new")
    assert dlopen(use) == ""  # on its own it loads
    assert f"version `V2' not found (required by {use})" in dlopen(root)
    (f,) = rule(audit("--root", str(tree), str(tree)), "symbol-version-missing")
    assert (f["file"], f["provider"], f["version"]) == (str(use), str(old), "V2")


def test_versions_in_a_wheel_read_in_memory(tmp_path):
    """A wheel's members are read in memory; their version tables too: the
    same verdict as on the unpacked tree."""
    from wheelfiles import make_wheel

    tree = tmp_path / "tree"
    use = consumer(tree / "pkg/libuse.so", provider(tree / "pkg/libp.so.1", V12))
    provider(tree / "pkg/libp.so.1", V1_ONLY)
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl",
                       {"pkg/libuse.so": use.read_bytes(), "pkg/libp.so.1": (tree / "pkg/libp.so.1").read_bytes(),
                        "pkg-1.0.dist-info/RECORD": b""})
    (f,) = rule(audit(str(wheel)), "symbol-version-missing")
    assert (os.path.basename(f["file"]), f["version"], f["newest"]) == ("libuse.so", "V2", "V1")


@pytest.fixture(scope="module")
def versioned(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("versioned")
    lib = provider(d / "libp.so.1", V12)
    script = d / "use.map"
    script.write_text(V12.replace("foo1", "bar1").replace("foo2", "bar2; use"))
    return gcc(d / "libuse.so", CONSUMER + PROVIDER.replace("foo", "bar"), "-Wl,--no-as-needed", str(lib),
               f"-Wl,--version-script={script}").read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_version_and_symbol_tables(tmp_path, versioned, data):
    """Byte overwrites of a library with both version tables, a GNU hash
    table and undefined symbols, aimed at its tables: reading them returns
    or raises InvalidElf, nothing else."""
    from closure_audit.elf.reader import InvalidElf
    from closure_audit.loader.symbols import name_hash

    image = bytearray(versioned)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0x200, 0x800))  # the dynamic tables of a small gcc library
        chunk = data.draw(st.binary(min_size=1, max_size=4))
        image[pos:pos + len(chunk)] = chunk
    p = tmp_path / "fuzz.so"
    p.write_bytes(bytes(image))
    try:
        elf = read_elf(str(p))
    except InvalidElf:
        return
    img = Image.open(None, str(p), elf)
    try:
        table = Symbols(str(p), img, read_versions(img), elf.elf_class)
        table.undefined()
        for name in ("foo2", "bar1", "use"):
            table.defines(name, data.draw(st.sampled_from([None, "V1", "V2"])), name_hash(name))
    except InvalidElf as exc:
        assert exc.reason
    finally:
        img.close()


def test_symbols_of_a_need_without_a_file_are_not_judged(tmp_path):
    """-z now and a need of the driver, which the model answers with no
    file (the host's driver, outside the tree): cuInit could come from it,
    so nothing is said; what the C runtime defines is found in the host's."""
    tree = tmp_path / "tree"
    stub = gcc(tmp_path / "stubs/libcuda.so", "int cuInit(int f) { return 0; }\n", "-Wl,-soname,libcuda.so.1")
    gcc(tree / "lib/libuse.so", "#include <stdio.h>\nint cuInit(int);\nint use(void) { printf(\"x\"); return cuInit(0); }\n",
        "-Wl,-z,now", "-Wl,--no-as-needed", str(stub))
    report = audit("--symbols", "--root", str(tree), str(tree))
    assert not rule(report, "undefined-symbol"), report["findings"]


@needs_nix
def test_bind_now_in_the_store_without_false_symbols(tmp_path):
    """Nix links with -z now: a store library needing the C runtime and
    the driver through /run/opengl-driver/lib has no undefined-symbol."""
    body = r"""
    rec {
      stub = clib "fixture-cuda-stub" "libcuda.so" "int cuInit(int f) { return 0; }" "-Wl,-soname,libcuda.so.1";
      use = clib "fixture-bindnow" "libuse.so" "int cuInit(int); int puts(const char *); int use(void) { puts(\"x\"); return cuInit(0); }"
        "-Wl,-z,now -Wl,--no-as-needed -L${stub}/lib -lcuda -Wl,-rpath,/run/opengl-driver/lib";
    }
    """
    (out,) = nix_build(tmp_path, body, "use")
    report = audit("--symbols", out)
    assert not rule(report, "undefined-symbol"), report["findings"]


def test_a_version_named_as_the_soname_matches_the_base_entry(tmp_path):
    """glibc compares a required version with every DT_VERDEF entry, the
    base one (the SONAME) included: a version named as the SONAME (NVIDIA's
    libraries name theirs so) is found in a file that defines no such
    version but has that SONAME."""
    tree = tmp_path / "tree"
    named = tmp_path / "named.map"
    named.write_text("libp.so.1 { global: *; };\n")
    other = tmp_path / "other.map"
    other.write_text("OTHER { global: *; };\n")
    lib = gcc(tree / "lib/libp.so.1", PROVIDER, "-Wl,-soname,libp.so.1", f"-Wl,--version-script={named}")
    use = consumer(tree / "lib/libuse.so", lib)
    gcc(tree / "lib/libp.so.1", PROVIDER, "-Wl,-soname,libp.so.1", f"-Wl,--version-script={other}")
    # The version check passes; binding foo2@libp.so.1 now (RTLD_NOW) does not.
    assert "undefined symbol: foo2, version libp.so.1" in dlopen(use) and "not found" not in dlopen(use)
    assert not rule(audit("--root", str(tree), str(tree)), "symbol-version-missing")


def test_version_of_a_need_a_preload_answers(stack, tmp_path):
    """CuPy's cuFFT module, built against the host's libcufft (version
    CUFFT_12), in a process where cuda-pathfinder has loaded the tree's copy
    first (which lacks it): the need is the name already loaded, and glibc
    refuses it there, though the module alone loads (issue 29's process model)."""
    (tmp_path / "host.map").write_text("CUFFT_12 { global: *; };\n")
    (tmp_path / "tree.map").write_text("OTHER { global: *; };\n")
    plan = "int cufftPlan(void) { return 1; }\n"
    host = gcc(stack.host / "libcufft.so.12", plan, "-Wl,-soname,libcufft.so.12", f"-Wl,--version-script={tmp_path / 'host.map'}")
    tree = gcc(stack.cu13 / "libcufft.so.12", plan, "-Wl,-soname,libcufft.so.12", f"-Wl,--version-script={tmp_path / 'tree.map'}")
    gcc(stack.cupy_cufft, "int cufftPlan(void); int f(void) { return cufftPlan(); }\n", "-Wl,--no-as-needed", str(host))
    env = {"LD_LIBRARY_PATH": str(stack.host)}
    assert dlopen(stack.cupy_cufft, env) == ""
    assert f"version `CUFFT_12' not found (required by {stack.cupy_cufft})" in dlopen(stack.cupy_cufft, env, tree)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[host]\ndirectories = ["{stack.host}"]\n')
    found = rule(audit("--policy", str(policy), str(stack.venv)), "symbol-version-missing")
    assert [(f["file"], f["provider"], f["version"]) for f in found] == [(str(stack.cupy_cufft), str(tree), "CUFFT_12")]


def test_undefined_symbol_a_frameworks_preload_defines(stack):
    """torch/_C needs bar, which only torch/lib/libtorch_global_deps.so
    defines: `import torch` loads that first, with RTLD_GLOBAL, so the
    process model's scope holds it and --symbols says nothing; alone, the
    module does not load."""
    deps = gcc(stack.site / "torch/lib/libtorch_global_deps.so", "int bar(void) { return 7; }\n")
    gcc(stack.torch_c, "void *PyInit__C(void) { return 0; }\nint bar(void); int use(void) { return bar(); }\n",
        "-Wl,--no-as-needed", str(stack.torch_cuda), "-Wl,-rpath,$ORIGIN/lib")
    assert "undefined symbol: bar" in dlopen(stack.torch_c)
    assert dlopen(stack.torch_c, preload=deps) == ""
    report = audit("--symbols", str(stack.venv))
    assert not [f for f in rule(report, "undefined-symbol") if f["file"] == str(stack.torch_c)]
