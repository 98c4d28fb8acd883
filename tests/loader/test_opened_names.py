"""What objects open at run time: the names in read-only data, how they are
resolved (against glibc's real dlopen), and the findings of `audit`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from audits import audit
from conftest import run_cli, validate
from closure_audit.elf.reader import read_elf
from closure_audit.elf.strings import NoteEntry, names_in, read_names
from closure_audit.loader import dlopen
from closure_audit.loader import model as ld
from closure_audit.loader.environment import Environment, default_host_dirs
from closure_audit.loader.model import Loader

pytestmark = pytest.mark.fhs

# A library that opens what it names, the way the CUDA runtime inside cuBLAS does.
OPENER = r"""
#include <dlfcn.h>
static const char *names[] = { %s };
const char *message = "have you linked against libtorch.so?";
const char *symbol = "cudaFree@libcudart.so.13";
char writable[] = "libwritable.so.1";
int open_all(void) {
    int n = 0;
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        n += dlopen(names[i], RTLD_NOW) != 0;
    return n;
}
"""


def opener(build, rel, names, **kw):
    code = OPENER % ", ".join(f'"{n}"' for n in names)
    return build.lib(rel, code=code, **kw)


def names_of(path) -> dict[str, int]:
    found, _ = read_names(str(path))
    return {n.text: n.offset for n in found}


def test_names_are_whole_strings_in_read_only_data_with_their_offsets(build):
    lib = opener(build, "lib/libcublas.so.13", ["libcuda.so.1", "libnvrtc.so.%d", "libcudnn_ops.so"])
    found, searched = read_names(str(lib))
    names = {n.text: n for n in found}
    assert set(names) == {"libcuda.so.1", "libnvrtc.so.%d", "libcudnn_ops.so"}
    data = lib.read_bytes()
    for text, n in names.items():
        assert data[n.offset:n.offset + len(text) + 1] == text.encode() + b"\0"
        assert n.section.startswith(".rodata")
    # Only read-only data is read: not the writable array, not the whole file.
    assert "libwritable.so.1" not in names and 0 < searched < len(data) // 4


@pytest.mark.parametrize("data, names", [
    (b"\0have you linked against libtorch.so\0", []),  # inside a message
    (b"\0cudaFree@libcudart.so.13\0", []),  # a versioned symbol
    (b"\x82\xdclibcuda.so.1\0cuInit\0", ["libcuda.so.1"]),  # right after a table, no NUL between (cuBLAS)
    (b"\x124Blibmlx5.so\0", ["libmlx5.so"]),  # table bytes that happen to be a digit and a capital
    (b"\0skipping registration olibcuda.so.1\0", ["libcuda.so.1"]),  # after a message without its NUL (torch)
    (b"\0%s-%s.so\0libnvrtc.so.%d\0", ["%s-%s.so", "libnvrtc.so.%d"]),
    (b"\0libcuda.so.1 \0libfoo.so.x\0", []),  # not up to a NUL; not a version
])
def test_what_counts_as_a_name(data, names):
    assert [n.text for n in names_in(data, 0, len(data), ".rodata")] == names


def test_requests_fold_fallbacks_build_runtime_names_and_drop_what_is_needed(build):
    dep = build.lib("lib/libdep.so.2")
    lib = opener(build, "lib/libcudnn_graph.so.9", [
        "libcuda.so", "libcuda.so.1", "libcudnn_engines_precompiled.so", "libnvrtc.so.%d", "libdep.so.2",
        "libcudnn_graph.so", "lib%s.so", "libibverbs.so.1", "libsomething.so.3"], links=[dep],
        soname="libcudnn_graph.so.9")
    elf = read_elf(str(lib))
    reqs = {r.name: r for r in dlopen.requests(elf, read_names(str(lib))[0])}
    assert set(reqs) == {"libcuda.so.1", "libcudnn_engines_precompiled.so.9", "libnvrtc.so.%d", "lib%s.so",
                         "libibverbs.so.1", "libsomething.so.3"}
    assert reqs["libcuda.so.1"].fallbacks == ("libcuda.so",) and reqs["libcuda.so.1"].klass == "driver"
    cudnn = reqs["libcudnn_engines_precompiled.so.9"]
    assert (cudnn.string, cudnn.family, cudnn.klass) == ("libcudnn_engines_precompiled.so", "cuDNN sub-libraries",
                                                         "toolkit")
    assert reqs["libnvrtc.so.%d"].patterns == ("libnvrtc.so.[0-9]*",)
    assert reqs["lib%s.so"].patterns == () and reqs["lib%s.so"].klass == "unknown"
    assert reqs["libibverbs.so.1"].klass == "optional" and reqs["libsomething.so.3"].klass == "unknown"


# -- the model against glibc's dlopen ---------------------------------------------

MAIN = "int open_all(void);\nint main(void) { return open_all(); }\n"


def real_dlopen(exe) -> int:
    """How many of its names the program's opener really opened."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    return subprocess.run([str(exe)], env=env, capture_output=True, timeout=30).returncode


def model_dlopen(exe, opener_path) -> list[str]:
    env = Environment(mode="tree", tree_roots=(str(exe.parent.parent),), host_dirs=default_host_dirs())
    loader = Loader(env)
    real = os.path.realpath(exe)
    chain = loader.chain(real, read_elf(real))
    obj = next(o for o in chain.objects if o.real == os.path.realpath(opener_path))
    out = []
    for r in dlopen.requests(obj.elf, read_names(obj.real)[0]):
        out.append(dlopen.resolve(loader, chain, obj, r).how)
    return out


@pytest.mark.parametrize("case", ["caller-runpath", "exe-runpath", "exe-rpath", "already-loaded"])
def test_dlopen_search_agrees_with_glibc(build, case):
    """dlopen from a library searches the library's RUNPATH, never the
    executable's RUNPATH; RPATHs of the loaders count when the caller has no
    RUNPATH; a name already loaded needs no search."""
    target = build.lib("plugins/libtarget.so.1")
    caller_runpath = ["$ORIGIN/../plugins"] if case == "caller-runpath" else None
    lib = opener(build, "lib/libcaller.so", ["libtarget.so.1"], runpath=caller_runpath)
    kw = {"runpath": ["$ORIGIN/../lib", "$ORIGIN/../plugins"]}
    links = [lib]
    if case == "exe-rpath":
        kw = {"rpath": ["$ORIGIN/../lib", "$ORIGIN/../plugins"]}
    if case == "already-loaded":
        links = [lib, target]
    exe = build.exe("bin/app", code=MAIN, links=links, **kw)
    got = model_dlopen(exe, lib)
    expected = {"caller-runpath": ld.RUNPATH, "exe-runpath": ld.NOT_FOUND, "exe-rpath": ld.RPATH,
                "already-loaded": ld.ALREADY_LOADED}[case]
    assert got == [expected]
    assert real_dlopen(exe) == (0 if expected == ld.NOT_FOUND else 1)


# -- audit ----------------------------------------------------------------------

def by_rule(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_store_opener_without_driver_directory(build, monkeypatch):
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    lib = opener(build, "store/aaaa-cublas/lib/libcublas.so.13", ["libcuda.so", "libcuda.so.1",
                                                                 "libnvidia-ml.so.1"])
    report = audit(store / "aaaa-cublas")
    (f,) = by_rule(report)["missing-driver-runpath"]
    assert f.file == str(lib) and f.severity == "error"
    assert (f.fields["needed"], f.fields["string"]) == ("libcuda.so.1", "libcuda.so.1")
    assert f.fields["opened"] == ["libcuda.so.1", "libnvidia-ml.so.1"]
    assert lib.read_bytes()[f.fields["offset"]:].startswith(b"libcuda.so.1\0")
    # With the driver directory in its runpath, the same library passes.
    build.patch(lib, "--set-rpath", "/run/opengl-driver/lib")
    report = audit(store / "aaaa-cublas")
    assert not report.failed, [f.message for f in report.findings]
    assert {(r.name, r.how) for r in report.opened} == {("libcuda.so.1", ld.DRIVER), ("libnvidia-ml.so.1", ld.DRIVER)}


def test_toolkit_optional_and_unknown_names_in_a_tree(build):
    nvrtc = build.lib("nvidia/cu13/lib/libnvrtc.so.13")
    assert nvrtc.exists()
    lt = opener(build, "nvidia/cu13/lib/libcublasLt.so.13",
                ["libnvrtc.so.13", "libnvJitLink.so.13", "libibverbs.so.1", "libmystery.so.4"],
                runpath=["$ORIGIN"])
    report = audit(build.root)
    rules = by_rule(report)
    (f,) = rules["unresolved-dlopen-library"]
    assert (f.file, f.fields["needed"], f.severity) == (str(lt), "libnvJitLink.so.13", "error")
    assert f.fields["searched"][0] == str(build.root / "nvidia/cu13/lib") and f.fields["chain"] == [str(lt)]
    assert lt.read_bytes()[f.fields["offset"]:].startswith(b"libnvJitLink.so.13\0")
    assert [x.fields["needed"] for x in rules["optional-dlopen-library"]] == ["libibverbs.so.1"]
    assert [x.fields["needed"] for x in rules["unknown-dlopen-library"]] == ["libmystery.so.4"]
    assert {x.severity for x in rules["optional-dlopen-library"] + rules["unknown-dlopen-library"]} == {"info"}
    rows = {r.name: r for r in report.opened}
    assert rows["libnvrtc.so.13"].path == str(nvrtc) and rows["libnvrtc.so.13"].klass == "toolkit"
    # JSON lists every opened name with its class, under the schema.
    p = run_cli("audit", "--json", str(build.root))
    data = json.loads(p.stdout)
    validate(data)
    assert {(o["name"], o["class"]) for o in data["opened"]} == {
        ("libnvrtc.so.13", "toolkit"), ("libnvJitLink.so.13", "toolkit"), ("libibverbs.so.1", "optional"),
        ("libmystery.so.4", "unknown")}
    assert p.returncode == 1 and data["summary"]["opened"] == 4


def test_an_optional_name_never_fails(build):
    opener(build, "lib/libnccl.so.2", ["libibverbs.so.1", "libgdrapi.so.2", "libmlx5.so"], runpath=["$ORIGIN"])
    report = audit(build.root)
    assert not report.failed
    assert {f.rule for f in report.findings} == {"optional-dlopen-library"}


# -- the dlopen metadata note -----------------------------------------------------

def note_code(entries, *, raw: bytes | None = None, strings=()) -> str:
    """C source of a library carrying a `.note.dlopen` section, as systemd's
    SD_ELF_NOTE_DLOPEN emits it (owner FDO, type 0x407c0c0a, 4-byte aligned
    JSON), plus strings that open names the way code does."""
    text = (raw if raw is not None else json.dumps(entries).encode()).decode()
    asm = (".pushsection .note.dlopen,\"a\",@note\n.balign 4\n.long 4\n.long 2f-1f\n.long 0x407c0c0a\n"
           ".asciz \"FDO\"\n1: .asciz " + json.dumps(text) + "\n2: .balign 4\n.popsection\n")
    return (f"__asm__({json.dumps(asm)});\n"
            + OPENER % ", ".join(f'"{n}"' for n in strings))


NOTE = [{"soname": ["libnvrtc.so.13", "libnvrtc.so.12"], "priority": "required", "feature": "NVRTC",
         "description": "compiles kernels at run time"},
        {"soname": ["libcufile.so.0"], "priority": "recommended", "feature": "GPUDirect Storage"},
        {"soname": ["libibverbs.so.1"], "priority": "suggested", "feature": "RDMA"},
        {"soname": ["libpresent.so.2"], "priority": "required", "feature": "present"}]


def test_dlopen_note_is_read_with_its_offsets(build):
    lib = build.lib("lib/libnoted.so.1", code=note_code(NOTE))
    assert subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True).stdout.count("FDO") == 1
    found, _ = read_names(str(lib))
    notes = [n for n in found if isinstance(n, NoteEntry)]
    assert [(n.sonames, n.priority, n.feature) for n in notes] == [
        (tuple(e["soname"]), e["priority"], e["feature"]) for e in NOTE]
    data = lib.read_bytes()
    for n in notes:
        assert data[n.offset:].startswith(n.sonames[0].encode() + b'"') and n.section == ".note.dlopen"


def test_dlopen_note_priorities_judge_what_is_missing(build):
    """A library declaring NVRTC as required in its note, in a tree without
    NVRTC: an error with the note's feature and offset; recommended is a
    warning, suggested info; a name both in the note and in .rodata is one
    request, with the note's priority."""
    build.lib("lib/libpresent.so.2")
    lib = build.lib("lib/libnoted.so.1", code=note_code(NOTE, strings=["libnvrtc.so.13", "libmystery.so.4"]),
                    runpath=["$ORIGIN"])
    report = audit(build.root)
    rules = by_rule(report)
    (f,) = rules["unresolved-dlopen-library"]
    assert (f.file, f.severity, f.fields["needed"], f.fields["priority"], f.fields["feature"]) == (
        str(lib), "error", "libnvrtc.so.13", "required", "NVRTC")
    assert f.fields["sonames"] == ["libnvrtc.so.13", "libnvrtc.so.12"]
    assert lib.read_bytes()[f.fields["offset"]:].startswith(b'libnvrtc.so.13"')
    (w,) = rules["recommended-dlopen-library"]
    assert (w.severity, w.fields["needed"], w.fields["feature"]) == ("warning", "libcufile.so.0", "GPUDirect Storage")
    (i,) = [x for x in rules["optional-dlopen-library"] if x.fields.get("priority")]
    assert (i.severity, i.fields["needed"]) == ("info", "libibverbs.so.1")
    rows = {r.name: r for r in report.opened}
    assert [r.priority for r in report.opened if r.name.startswith("libnvrtc")] == ["required"]
    assert rows["libpresent.so.2"].how == ld.RUNPATH and rows["libmystery.so.4"].priority is None
    p = run_cli("audit", "--json", str(build.root))
    data = json.loads(p.stdout)
    validate(data)
    assert p.returncode == 1
    assert {o["name"]: o["priority"] for o in data["opened"]}["libnvrtc.so.13"] == "required"


def test_an_unreadable_dlopen_note_is_reported(build):
    build.lib("lib/libbad.so.1", code=note_code(None, raw=b'[{"soname": "libnvrtc.so.13"'))
    report = audit(build.root)
    (f,) = by_rule(report)["invalid-elf"]
    assert "dlopen note" in f.message and "not JSON" in f.message


# -- names without a version, against glibc --------------------------------------------

@pytest.mark.parametrize("case", ["sibling-loaded", "sibling-in-runpath"])
def test_a_name_without_a_version_is_not_its_versioned_file(build, case):
    """dlopen("libzzzrt.so") while libzzzrt.so.13 is loaded, or lies in the
    opener's runpath: glibc compares exact names and SONAMEs and searches for
    a file of exactly that name, so the call fails."""
    rt = build.lib("lib/libzzzrt.so.13")
    links = [rt] if case == "sibling-loaded" else []
    lib = opener(build, "lib/libcupti.so.13", ["libzzzrt.so"], links=links, runpath=["$ORIGIN"])
    exe = build.exe("bin/app", code=MAIN, links=[lib], runpath=["$ORIGIN/../lib"])
    assert real_dlopen(exe) == 0  # the real dlopen failed
    assert model_dlopen(exe, lib) == [ld.NOT_FOUND]
    report = audit(build.root)
    row = next(r for r in report.opened if r.name == "libzzzrt.so")
    assert row.how == ld.NOT_FOUND
    rules = by_rule(report)
    if case == "sibling-loaded":
        (f,) = rules["dlopen-fallback-name"]
        assert (f.severity, f.file, f.fields["loaded"]) == ("info", str(lib), str(rt)) and row.fallback_for == str(rt)
        assert "fallback" in f.message and not report.failed
    else:
        assert row.fallback_for is None and [f.fields["needed"] for f in rules["unknown-dlopen-library"]] == [
            "libzzzrt.so"]


def test_a_plugin_declared_in_a_dlopen_note_takes_the_notes_feature(build):
    gone = build.lib("gone/libwidgetkit.so.2")
    plug = build.lib("lib/libplug.so.1", links=[gone], runpath=["$ORIGIN"])
    build.lib("lib/libhost.so.1", runpath=["$ORIGIN"], code=note_code(
        [{"soname": ["libplug.so.1"], "priority": "suggested", "feature": "widgets"}]))
    shutil.rmtree(build.root / "gone")
    report = audit(build.root / "lib")
    (f,) = by_rule(report)["plugin-unresolved-library"]
    assert (f.file, f.fields["needed"], f.fields["feature"], f.severity) == (
        str(plug), "libwidgetkit.so.2", "widgets", "warning")
    assert not report.failed


def test_a_pattern_two_files_answer_resolves_alike_in_every_process(build):
    """libGLX_%s.so.0 beside libGLX_indirect.so.0 and libGLX_mesa.so.0 (as on
    Debian): one answer, whatever order the directory is listed in. The order
    of a set of names changes with each process's string hashes."""
    opener(build, "lib/libGLX.so.0", ["libGLX_%s.so.0"], runpath=["$ORIGIN"])
    build.lib("lib/libGLX_mesa.so.0")
    build.lib("lib/libGLX_indirect.so.0")
    paths = set()
    for seed in range(6):
        p = run_cli("audit", "--json", str(build.root), env={"PYTHONHASHSEED": str(seed)})
        (row,) = [r for r in json.loads(p.stdout)["opened"] if r["name"] == "libGLX_%s.so.0"]
        paths.add(row["path"])
    # Of files of one version, the first by name.
    assert paths == {str(build.root / "lib/libGLX_indirect.so.0")}
