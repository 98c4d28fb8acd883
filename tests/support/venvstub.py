"""A tree equivalent, for the loader, to a venv recorded by venvtruth.py:
at each recorded path a stub ELF file built with gcc and patchelf holding
the real file's SONAME, DT_NEEDED (in order), RPATH or RUNPATH, and the
library names the model found in its read-only data; the recorded
symlinks; each top-level package's directory. A stub that TensorFlow's
framework library stands for can dlopen a name from itself
(`stub_open`), so its own RUNPATH decides as the real one's does.

What a stub does not hold: code, symbols and their versions, and the
dlopens the real libraries make at run time (those are judged through the
model's opened rows, which the same strings give).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from closure_audit.loader.preloads import Preload, Preloads
from closure_audit.loader.preloads.common import HostSearch

PLAIN = "int stub_library = 1;\n"
OPENER = "#include <dlfcn.h>\nint stub_open(const char *n) { return dlopen(n, RTLD_NOW | RTLD_LOCAL) != 0; }\n"


def _c_string(s: str) -> str:
    return json.dumps(s)  # a C string literal for the plain ASCII names read here


def _compile(work: Path, name: str, code: str, keep_libc: bool) -> Path:
    src, out = work / f"{name}.c", work / f"{name}.so"
    src.write_text(code)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    if not keep_libc:  # the NEEDED list is the recorded one, libc.so.6 only where recorded
        subprocess.run(["patchelf", "--remove-needed", "libc.so.6", str(out)], check=True)
    return out


def build(fixture: dict, root: Path) -> tuple[Path, Path]:
    """Build the stub venv under root: (the venv, its site-packages)."""
    site = root / "venv" / "lib" / fixture["python"] / "site-packages"
    site.mkdir(parents=True)
    work = root / "stub-work"
    work.mkdir()
    openers = {p["opener"] for p in fixture["preloads"] if p.get("opener")}
    plain = _compile(work, "plain", PLAIN, keep_libc=False)
    for name in fixture["packages"]:
        (site / name).mkdir(exist_ok=True)
    for n, (rel, lib) in enumerate(sorted(fixture["libraries"].items())):
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if "link" in lib:
            os.symlink(lib["link"], path)
            continue
        opens = lib.get("opens", [])
        if rel in openers or opens:
            code = (OPENER if rel in openers else PLAIN) + "".join(
                f"const char *stub_name_{i} = {_c_string(s)};\n" for i, s in enumerate(opens))
            base = _compile(work, f"lib{n}", code, keep_libc=rel in openers)
            shutil.move(base, path)
        else:
            shutil.copyfile(plain, path)
        needed = list(lib.get("needed", []))
        if rel in openers and "libc.so.6" in needed:
            subprocess.run(["patchelf", "--remove-needed", "libc.so.6", str(path)], check=True)
        if needed:  # patchelf puts each name first: give them last to first
            subprocess.run(["patchelf", *[a for name in reversed(needed) for a in ("--add-needed", name)], str(path)],
                           check=True)
        if lib.get("soname"):
            subprocess.run(["patchelf", "--set-soname", lib["soname"], str(path)], check=True)
        search = lib.get("runpath") or lib.get("rpath")
        if search is not None:
            force = [] if lib.get("runpath") else ["--force-rpath"]
            subprocess.run(["patchelf", *force, "--set-rpath", search, str(path)], check=True)
    shutil.rmtree(work)
    return root / "venv", site


def preloads(fixture: dict, site: Path) -> Preloads:
    """The preloads the model read from the real venv's Python files, at the stub tree's paths."""
    out = []
    for p in fixture["preloads"]:
        d = dict(p)
        d["path"] = p["path"] if p.get("opener") or p.get("host") else str(site / p["path"])
        d["host"] = HostSearch(**{k: tuple(v) for k, v in p["host"].items()}) if p.get("host") else None
        d["opener"] = str(site / p["opener"]) if p.get("opener") else None
        d["unless"] = tuple(p.get("unless", ()))
        d["along"] = str(site / p["along"]) if p.get("along") else None
        out.append(Preload(**d))
    return Preloads(out, [])


REPLAY = r"""
import ctypes, json, os, sys
roots, opens = json.loads(sys.argv[1]), json.loads(sys.argv[2])
failed = []
for path in roots:
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOW)
    except OSError as e:
        failed.append([path, str(e).split(":")[0].strip()])
for opener, name in opens:
    try:
        ctypes.CDLL(opener, mode=os.RTLD_NOW).stub_open(name.encode())
    except OSError:
        pass  # the opener's own load failed: nothing is opened
with open("/proc/self/maps") as f:
    maps = sorted({l.split(maxsplit=5)[5].strip() for l in f if len(l.split(maxsplit=5)) == 6})
print(json.dumps([failed, maps]))
"""


def replay(proc, driver: str, gone=()) -> tuple[list[list[str]], list[str]]:
    """The real loader on the stub tree: a fresh process loads the model
    process's roots in its order (preloads, modules, loads that fail), then
    dlopens each name an opener opens from that opener. (failed [path,
    name], mapped files). The loads of frameworks in `gone` are left out,
    as the recording left out a framework whose import killed the process."""
    roots = []
    failed = sorted(proc.failed, key=lambda f: f[2])
    k = 0
    for i, obj in enumerate(proc.link_map.objects + [None]):
        while k < len(failed) and failed[k][2] <= i:
            roots.append(failed[k][0].root.path)
            k += 1
        if obj is not None and obj.parent is None and proc.framework_of(obj) not in gone:
            roots.append(obj.path)
    opens = [[preload.opener, preload.path] for preload, _file in proc.opened]
    p = subprocess.run([sys.executable, "-c", REPLAY, json.dumps(roots), json.dumps(opens)], capture_output=True,
                       text=True, check=True, env={"LD_LIBRARY_PATH": driver, "PATH": "/usr/bin:/bin"})
    return json.loads(p.stdout)
