"""`closure-audit trace`: what the real loader did, read from LD_DEBUG, held
against /proc/self/maps of the same process, and its findings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import run_cli, shared_object as gcc
from nixstore import needs_nix, nix_build

from closure_audit.elf.reader import read_elf
from closure_audit.loader import ld_debug


def venv(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A venv-shaped tree: pkg/libtop.so needs libdep.so.1 through its
    RUNPATH; pkg/libplug.so is opened at run time."""
    tree = tmp_path / "venv"
    (tree / "pyvenv.cfg").parent.mkdir(parents=True)
    (tree / "pyvenv.cfg").write_text("home = /usr/bin\n")
    pkg = tree / "lib/python3.11/site-packages/pkg"
    dep = gcc(pkg / "libdep.so.1", "int dep(void) { return 1; }\n", "-Wl,-soname,libdep.so.1")
    top = gcc(pkg / "libtop.so", "int dep(void); int top(void) { return dep(); }\n", "-Wl,--no-as-needed",
              str(dep), "-Wl,--enable-new-dtags,-rpath,$ORIGIN")
    plug = gcc(pkg / "libplug.so", "int plug(void) { return 2; }\n")
    return tree, top, dep, plug


def python(*lines: str, status: int = 0) -> list[str]:
    return [sys.executable, "-c", "import ctypes, sys\n" + "\n".join(lines) + f"\nsys.exit({status})"]


def trace(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    p = run_cli("trace", "--json", *args, env=env)
    return p, json.loads(p.stdout)


def main_image(report: dict) -> dict:
    """The command's own process image: the last one of the first pid."""
    first = report["processes"][0]["pid"]
    return [p for p in report["processes"] if p["pid"] == first][-1]


def test_trace_lists_what_proc_maps_shows(tmp_path):
    tree, top, dep, plug = venv(tmp_path)
    maps = tmp_path / "maps"
    command = python(f"ctypes.CDLL({str(top)!r})", f"ctypes.CDLL({str(plug)!r})",
                     f"open({str(maps)!r}, 'w').write(open('/proc/self/maps').read())", status=3)
    p, report = trace("--against", str(tree), "--", *command)
    assert p.returncode == 3, p.stderr  # the command's own status, passed through
    assert report["target"] == command  # the command line (docs/reference/json.md)
    assert report["exit_status"] == 3 and report["tree_root"] == str(tree)
    image = main_image(report)
    mapped = set()
    for line in maps.read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/") and os.path.isfile(fields[5]):
            try:
                if read_elf(fields[5]) is not None:
                    mapped.add(os.path.realpath(fields[5]))
            except Exception:
                continue
    traced = {o["real"] for o in image["objects"]}
    assert traced == mapped
    objects = {o["real"]: o for o in image["objects"]}
    assert objects[str(dep)]["how"] == "needed" and objects[str(dep)]["by"] == str(top)
    assert objects[str(plug)]["how"] == "dlopen"
    assert {objects[str(f)]["where"] for f in (top, dep, plug)} == {"tree"}
    assert image["objects"][0]["how"] == "program" and image["objects"][1]["how"] == "interpreter"
    assert not report["findings"]


def test_cuda_runtime_from_the_host(tmp_path):
    """The CUDA runtime's name, loaded from outside the tree: a warning when
    the tree has no copy, an error when it has one."""
    tree, *_ = venv(tmp_path)
    host = gcc(tmp_path / "host/libcudart.so.13", "int cudart(void) { return 13; }\n", "-Wl,-soname,libcudart.so.13")
    command = python(f"ctypes.CDLL({str(host)!r})")
    p, report = trace("--against", str(tree), "--", *command)
    assert p.returncode == 0
    (f,) = [f for f in report["findings"] if f["rule"] == "cuda-library-host-loaded"]
    assert f["severity"] == "warning" and f["path"] == str(host)
    copy = gcc(tree / "lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13", "int cudart(void) { return 1; }\n")
    p, report = trace("--against", str(tree), "--", *command)
    assert p.returncode == 1
    (f,) = [f for f in report["findings"] if f["rule"] == "cuda-library-host-over-tree"]
    assert f["severity"] == "error" and f["tree_copy"] == str(copy)


def test_one_library_from_two_files(tmp_path):
    tree, *_ = venv(tmp_path)
    a = gcc(tree / "lib/python3.11/site-packages/nvidia/lib/libcudart.so.13", "int a(void) { return 1; }\n")
    b = gcc(tree / "lib/python3.11/site-packages/torchvision.libs/libcudart.faf08d9a.so.13",
            "int b(void) { return 2; }\n")
    _p, report = trace("--against", str(tree), "--", *python(f"ctypes.CDLL({str(a)!r})", f"ctypes.CDLL({str(b)!r})"))
    (f,) = [f for f in report["findings"] if f["rule"] == "library-loaded-twice"]
    assert f["library"] == "libcudart" and f["paths"] == sorted([str(a), str(b)])


def test_against_names_where_the_model_differs(tmp_path):
    """LD_LIBRARY_PATH comes before RUNPATH: the process takes another
    libdep.so.1 than audit's model of the tree predicts."""
    tree, top, dep, _plug = venv(tmp_path)
    other = gcc(tmp_path / "elsewhere/libdep.so.1", "int dep(void) { return 9; }\n", "-Wl,-soname,libdep.so.1")
    command = python(f"ctypes.CDLL({str(top)!r})")
    _p, report = trace("--against", str(tree), "--", *command)
    assert not [f for f in report["findings"] if f["rule"] == "trace-differs-from-audit"]
    _p, report = trace("--against", str(tree), "--", *command, env={"LD_LIBRARY_PATH": str(other.parent)})
    (f,) = [f for f in report["findings"] if f["rule"] == "trace-differs-from-audit"]
    assert (f["file"], f["library"], f["path"], f["predicted"]) == (str(top), "libdep.so.1", str(other), str(dep))


def test_a_driver_that_is_not_the_hosts(tmp_path):
    tree, *_ = venv(tmp_path)
    stub = gcc(tree / "lib/python3.11/site-packages/pkg/stubs/libcuda.so.1", "int cuInit(int f) { return 100; }\n")
    _p, report = trace("--against", str(tree), "--", *python(f"ctypes.CDLL({str(stub)!r})"))
    (f,) = [f for f in report["findings"] if f["rule"] == "driver-not-host-driver"]
    assert f["path"] == str(stub)


def test_terminal_table(tmp_path):
    """The terminal view: the command's own image as a table, the findings, the verdict."""
    tree, top, dep, _plug = venv(tmp_path)
    p = run_cli("trace", "--against", str(tree), "--", *python(f"ctypes.CDLL({str(top)!r})"))
    assert p.returncode == 0, p.stderr
    assert f"needed by {top.name}" in p.stdout and str(dep) in p.stdout
    assert "OK: no finding of severity error" in p.stdout
    assert f"· {sys.executable} -c" in p.stdout.splitlines()[0]  # the header names the command line


def test_tree_found_from_the_process(tmp_path):
    """Without --against, the tree is the venv the process's objects come
    from: the program's own (this suite's venv), else the first object's."""
    tree, top, *_ = venv(tmp_path)
    command = python(f"ctypes.CDLL({str(top)!r})")
    if sys.prefix != sys.base_prefix:  # the suite runs in a venv
        _p, report = trace("--", *command)
        assert report["tree_root"] == os.path.realpath(sys.prefix)
    _p, report = trace("--", os.path.realpath(sys.executable), *command[1:])
    assert report["tree_root"] == str(tree)


def test_command_not_found_is_one_line(tmp_path):
    p = run_cli("trace", "--", str(tmp_path / "no-such-command"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "command not found" in p.stderr
    p = run_cli("trace")
    assert p.returncode == 2 and "needs a command" in p.stderr
    marker = tmp_path / "ran"
    p = run_cli("trace", "--against", str(tmp_path / "nowhere"), "--", "touch", str(marker))
    assert p.returncode == 2 and "--against is not a directory" in p.stderr and not marker.exists()


def test_help_says_the_status_passes_through():
    p = run_cli("trace", "--help")
    assert "COMMAND's own, passed through" in " ".join(p.stdout.split())


def test_parse_exec_chain_and_children():
    """An exec'd program starts a new image in the same file; a forked
    child writes under its own pid."""
    text = "\n".join([
        "   10:\tfile=libc.so.6 [0];  needed by /bin/sh [0]",
        "   10:\t  trying file=/lib/libc.so.6",
        "   10:\tfile=libc.so.6 [0];  generating link map",
        "   10:\tcalling init: /lib64/ld-linux-x86-64.so.2",
        "   10:\tinitialize program: /bin/sh",
        "   10:\ttransferring control: /bin/sh",
        "   10:\tfile=libc.so.6 [0];  needed by python3 [0]",
        "   10:\t  trying file=/lib/libc.so.6",
        "   10:\tfile=libc.so.6 [0];  generating link map",
        "   10:\tinitialize program: python3",
        "   10:\ttransferring control: python3",
        "   10:\tfile=/t/a.so [0];  dynamically loaded by python3 [0]",
        "   10:\tfile=/t/a.so [0];  generating link map",
        "   10:\tfile=libb.so [0];  needed by /t/a.so [0]",
        "   10:\t  trying file=/t/libb.so",
        "   10:\tfile=libb.so [0];  generating link map",
    ])
    first, second = ld_debug.parse(text)
    assert first.program == "/bin/sh" and [o.how for o in first.objects] == ["program", "interpreter", "needed"]
    assert second.program == "python3"
    assert [(o.name, o.path, o.how, o.by) for o in second.objects[1:]] == [
        ("libc.so.6", "/lib/libc.so.6", "needed", "python3"),
        ("/t/a.so", "/t/a.so", "dlopen", "python3"),
        ("libb.so", "/t/libb.so", "needed", "/t/a.so")]


@needs_nix
def test_an_object_of_the_store(tmp_path):
    (out,) = nix_build(tmp_path, '{ lib = clib "fixture-traced" "libtraced.so" "int t(void) { return 1; }" ""; }',
                       "lib")
    lib = os.path.join(out, "lib/libtraced.so")
    _p, report = trace("--", *python(f"ctypes.CDLL({lib!r})"))
    (obj,) = [o for o in main_image(report)["objects"] if o["real"] == lib]
    assert obj["where"] == "store" and obj["how"] == "dlopen"


def test_a_module_whose_load_fails_is_not_listed_as_loaded(tmp_path):
    """A module whose need is found nowhere: glibc maps it and the needs it
    found, then unmaps them all and the dlopen fails. /proc/self/maps
    afterwards holds none of them; trace lists them as failed, not loaded.
    A library dlclosed after a dlopen that succeeded was loaded: it stays."""
    tree, _top, dep, _plug = venv(tmp_path)
    pkg = tree / "lib/python3.11/site-packages/pkg"
    missing = gcc(tmp_path / "gone/libmissing.so.1", "int gone(void) { return 0; }\n", "-Wl,-soname,libmissing.so.1")
    middle = gcc(pkg / "libmiddle.so", "int middle(void) { return 1; }\n", "-Wl,-soname,libmiddle.so",
                 "-Wl,--no-as-needed", str(missing))
    module = gcc(pkg / "_mod.cpython-311-x86_64-linux-gnu.so", "int mod(void) { return 1; }\n", "-Wl,--no-as-needed",
                 str(middle), str(dep), "-Wl,--enable-new-dtags,-rpath,$ORIGIN")
    missing.unlink()
    closed = gcc(pkg / "libclosed.so", "int closed(void) { return 3; }\n")
    maps = tmp_path / "maps"
    command = python("import _ctypes",
                     f"try:\n    ctypes.CDLL({str(module)!r})\nexcept OSError as e:\n    print(e, file=sys.stderr)",
                     f"h = ctypes.CDLL({str(closed)!r})", "_ctypes.dlclose(h._handle)",
                     f"open({str(maps)!r}, 'w').write(open('/proc/self/maps').read())")
    p, report = trace("--against", str(tree), "--", *command)
    assert p.returncode == 0, p.stderr
    mapped = {line.split(maxsplit=5)[5] for line in maps.read_text().splitlines() if len(line.split()) == 6}
    image = main_image(report)
    traced = {o["real"] for o in image["objects"]}
    failed = {o["real"]: o for o in image["failed"]}
    # The real loader mapped none of the failed load's objects, and still has what loaded before.
    assert not {str(module), str(middle), str(dep)} & mapped
    assert set(failed) == {str(module), str(middle), str(dep)}
    assert not set(failed) & traced
    assert failed[str(module)]["how"] == "dlopen" and failed[str(middle)]["by"] == str(module)
    assert str(closed) in traced and str(closed) not in mapped
    p = run_cli("trace", "--against", str(tree), "--", *command)
    assert f"failed: {module}" in p.stdout


def test_import_order_needs_a_tree_and_names_its_frameworks(tmp_path):
    """--import-order orders the model's union: without --against there is
    none; a name that is no framework of the tree is a one-line error, and
    the command is never run."""
    tree, *_ = venv(tmp_path)
    marker = tmp_path / "ran"
    command = python(f"open({str(marker)!r}, 'w')")
    p = run_cli("trace", "--import-order", "torch,cupy", "--", *command)
    assert p.returncode == 2 and "--against" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = run_cli("trace", "--against", str(tree), "--import-order", "torch,", "--", *command)
    assert p.returncode == 2 and "comma-separated" in p.stderr
    assert not marker.exists()
    p = run_cli("trace", "--against", str(tree), "--import-order", "torch", "--", *command)
    assert p.returncode == 2 and "torch is no framework of the tree" in p.stderr and "Traceback" not in p.stderr
    assert not marker.exists()
