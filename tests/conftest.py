"""Shared fixtures: real ELF files built by gcc, binutils and patchelf.

Every file a test builds through `build` is also read with pyelftools right
after it is made and compared with closure_audit.elf.reader, so the reader is checked
against an independent implementation on every ELF file the tests build.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest

# Every run draws the same examples (seeded by each test's name), so a failure
# is one every run sees, never a chance one; no database of earlier failures
# changes what a run tries.
hypothesis.settings.register_profile("seeded", derandomize=True, database=None)
hypothesis.settings.load_profile("seeded")

ROOT = Path(__file__).resolve().parent.parent
# The helpers (support/) import by name from every folder of tests; tests/ holds
# conftest and the fuzzing campaign's package.
sys.path[:0] = [str(Path(__file__).resolve().parent / "support"), str(Path(__file__).resolve().parent)]

import closure_audit  # noqa: E402
from closure_audit.elf.reader import parse_sections, read_elf  # noqa: E402
from closure_audit.elf.versions import Image, read_versions  # noqa: E402
from parts import CI, require  # noqa: E402


def package_files() -> dict[str, Path]:
    """What the wheel installs, by installed name: every file of the packages in
    tools/ (their modules and the data beside them) and lib/data as nixcuda_data."""
    out = {str(p.relative_to(ROOT / "tools")): p for p in (ROOT / "tools").rglob("*")
           if p.is_file() and not any(part == "__pycache__" or part.endswith(".egg-info") for part in p.parts)}
    return out | {f"nixcuda_data/{p.name}": p for p in (ROOT / "lib/data").iterdir() if p.is_file()}


def _installed_as_built() -> None:
    """The suite tests the package as installed (ci/setup installs the wheel it
    builds), never tools/ by path. Under CI=true an editable install is refused;
    elsewhere an installed copy older than the checkout is, so no edit goes
    untested."""
    installed = Path(closure_audit.__file__).resolve().parent.parent
    if installed == ROOT / "tools":
        if CI:
            pytest.exit("CI=true tests the installed wheel, but closure_audit is the checkout's (an editable "
                        "install): run ci/test", returncode=4)
        return
    for name, source in sorted(package_files().items()):
        copy = installed / name
        if copy.exists() and copy.read_bytes() != source.read_bytes():
            pytest.exit(f"the installed {name} differs from the checkout's: run ci/setup "
                        "(or pip install -e . to work on the code)", returncode=4)


_installed_as_built()

CROSS = {  # binutils prefix -> (class, little-endian)
    "powerpc64-linux-gnu": (64, False),
    "mips-linux-gnu": (32, False),
    "aarch64-linux-gnu": (64, True),
}


def _fhs_host() -> bool:
    """A host whose own loader searches /etc/ld.so.conf and the usual system
    directories (Debian, Fedora, ...): what tests comparing tree mode with the
    host's loader need. A Nix build sandbox is not one."""
    return os.path.exists("/etc/ld.so.conf") and any(
        os.path.exists(p) for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"))


FHS_HOST = _fhs_host()


def pytest_addoption(parser):
    parser.addoption("--update-snapshots", action="store_true",
                     help="rewrite the output snapshots in tests/snapshots/ that differ (support/snapshots.py)")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a host with FHS system libraries (not a Nix build sandbox)")
    for item in items:
        if "fhs" in item.keywords and not FHS_HOST:
            item.add_marker(skip)
        if any(m.kwargs.get("nix") for name in ("needs_part", "missing_part") for m in item.iter_markers(name)):
            item.add_marker(pytest.mark.nix)


def pytest_runtest_setup(item):
    for mark in item.iter_markers("missing_part"):
        require(mark.args[0], False)


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def pyelftools_facts(path: str) -> dict:
    """The reader's fields, as pyelftools sees them."""
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        facts = {
            "elf_class": elf.elfclass,
            "little_endian": elf.little_endian,
            "type": elf["e_type"],
            "machine": elf["e_machine"],
            "interp": None, "needed": [], "rpath": None, "runpath": None, "soname": None, "flags_1": 0,
            "has_dynamic": False,
        }
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_INTERP" and facts["interp"] is None:
                facts["interp"] = seg.get_interp_name()
            if isinstance(seg, DynamicSegment) and not facts["has_dynamic"]:
                facts["has_dynamic"] = True
                for tag in seg.iter_tags():
                    t = tag.entry.d_tag
                    if t == "DT_NEEDED":
                        facts["needed"].append(tag.needed)
                    elif t == "DT_RPATH":
                        facts["rpath"] = tag.rpath
                    elif t == "DT_RUNPATH":
                        facts["runpath"] = tag.runpath
                    elif t == "DT_SONAME":
                        facts["soname"] = tag.soname
                    elif t == "DT_FLAGS_1":
                        facts["flags_1"] = tag.entry.d_val
        facts["sections"] = [(s.name, s["sh_flags"], s["sh_offset"], 0 if s["sh_type"] == "SHT_NOBITS" else s["sh_size"])
                             for s in list(elf.iter_sections())[1:]]
        facts["versions"] = _pyelftools_versions(elf)
        return facts


def _pyelftools_versions(elf) -> tuple[list, list]:
    """(every Vernaux as (file, version, weak), the names DT_VERDEF defines), sorted."""
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

    required, defined = [], []
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            required += [(v.name, a.name, bool(a["vna_flags"] & 2)) for v, auxes in section.iter_versions()
                         for a in auxes]
        elif isinstance(section, GNUVerDefSection):
            defined += [next(auxes).name for _d, auxes in section.iter_versions()]
    return sorted(required), sorted(set(defined))  # a set: the base entry may bear a version's name


def our_facts(path: str) -> dict:
    e = read_elf(path)
    return {
        "elf_class": e.elf_class, "little_endian": e.little_endian,
        "type": e.type_name, "machine": e.machine_name, "interp": e.interp,
        "needed": list(e.needed), "rpath": e.rpath, "runpath": e.runpath, "soname": e.soname,
        "flags_1": e.flags_1, "has_dynamic": e.has_dynamic,
        "sections": [(s.name, s.flags, s.offset, s.size) for s in our_sections(path)],
        "versions": _our_versions(path, e),
    }


def _our_versions(path: str, elf) -> tuple[list, list]:
    image = Image.open(None, path, elf)
    try:
        v = read_versions(image)
    finally:
        image.close()
    return sorted((r.file, r.version, r.weak) for r in v.required), sorted(v.defined)


def our_sections(path: str):
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return parse_sections(data, len(data))


def assert_matches_pyelftools(path: str) -> None:
    ours, theirs = our_facts(path), pyelftools_facts(path)
    # Names for machines and types only one side knows are compared by number.
    for key, prefix in (("machine", "EM_"), ("type", "ET_")):
        if isinstance(theirs[key], int) or not ours[key].startswith(prefix) or ours[key][3:].isdigit():
            ours[key], theirs[key] = _number(ours[key]), _number(theirs[key])
    assert ours == theirs, f"{path}: reader disagrees with pyelftools"


def _number(name):
    from elftools.elf.enums import ENUM_E_MACHINE, ENUM_E_TYPE

    if isinstance(name, int):
        return name
    if name[3:].isdigit():
        return int(name[3:])
    if name.startswith("ET_0x"):
        return int(name[3:], 16)
    return ENUM_E_MACHINE.get(name, ENUM_E_TYPE.get(name, name))


def shared_object(out: Path, source: str, *flags: str) -> Path:
    """A shared object gcc builds from C `source` at `out`, with extra flags
    (a version script, -z now, the libraries it needs), read by pyelftools
    too as every built file is."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / f".{out.name}.c"
    src.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src), *flags], check=True)
    src.unlink()
    assert_matches_pyelftools(str(out))
    return out


class Builder:
    """Builds real ELF files under `root`. Paths are relative to root."""

    def __init__(self, root: Path, objects: dict[str, Path]):
        self.root = root
        self.objects = objects
        self.built: list[Path] = []

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def _link_flags(self, runpath, rpath, nodeflib, links):
        flags = ["-Wl,--no-as-needed"]
        if runpath is not None:
            flags.append("-Wl,--enable-new-dtags,-rpath," + ":".join(runpath))
        if rpath is not None:
            flags.append("-Wl,--disable-new-dtags,-rpath," + ":".join(rpath))
        if nodeflib:
            flags.append("-Wl,-z,nodefaultlib")
        flags.extend(str(Path(lib)) for lib in links)
        return flags

    def lib(self, rel: str, *, soname: str | None = None, links=(), runpath=None, rpath=None,
            nodeflib=False, m32=False, code: str | None = None) -> Path:
        out = self.path(rel)
        soname = soname if soname is not None else out.name
        if m32:
            cmd = ["gcc", "-m32", "-nostdlib", "-shared", "-fPIC", "-o", str(out), str(self.objects["empty32"])]
        else:
            src = self.objects["empty"] if code is None else self._compile(code)
            cmd = ["gcc", "-shared", "-o", str(out), str(src)]
        if soname:
            cmd.append(f"-Wl,-soname,{soname}")
        cmd += self._link_flags(runpath, rpath, nodeflib, links)
        return self._run(cmd, out)

    def exe(self, rel: str, *, links=(), runpath=None, rpath=None, nodeflib=False, code: str | None = None,
            static=False) -> Path:
        out = self.path(rel)
        src = self.objects["main"] if code is None else self._compile(code, pic=False)
        cmd = ["gcc", "-o", str(out), str(src)] + (["-static"] if static else [])
        cmd += self._link_flags(runpath, rpath, nodeflib, links)
        return self._run(cmd, out)

    def cross(self, rel: str, prefix: str, *, soname: str | None = None, links=(), runpath=None) -> Path:
        out = self.path(rel)
        obj = out.with_suffix(".o")
        asm = out.with_suffix(".s")
        asm.write_text(".data\n.globl value\nvalue: .long 1\n")
        subprocess.run([f"{prefix}-as", "-o", str(obj), str(asm)], check=True)
        cmd = [f"{prefix}-ld", "-shared", "-soname", soname or out.name, "-o", str(out), str(obj)]
        if runpath is not None:
            cmd += ["--enable-new-dtags", "-rpath", ":".join(runpath)]
        cmd += [str(lib) for lib in links]
        subprocess.run(cmd, check=True)
        obj.unlink()
        asm.unlink()
        return self._record(out)

    def _compile(self, code: str, pic: bool = True) -> Path:
        src = self.root / f".src{len(self.built)}_{abs(hash(code))}.c"
        src.write_text(code)
        obj = src.with_suffix(".o")
        subprocess.run(["gcc", "-c", "-fPIC" if pic else "-fno-PIC", "-o", str(obj), str(src)], check=True)
        return obj

    def _run(self, cmd, out: Path) -> Path:
        subprocess.run(cmd, check=True, capture_output=True)
        return self._record(out)

    def _record(self, out: Path) -> Path:
        assert_matches_pyelftools(str(out))
        self.built.append(out)
        return out

    def patch(self, path: Path, *args: str) -> Path:
        subprocess.run(["patchelf", *args, str(path)], check=True, capture_output=True)
        return self._record(path)


@pytest.fixture(scope="session")
def objects(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("objects")
    (d / "empty.c").write_text("int nixcuda_fixture_value = 1;\n")
    (d / "main.c").write_text("int main(void) { return 0; }\n")
    out = {"empty": d / "empty.o", "main": d / "main.o", "empty32": d / "empty32.o"}
    subprocess.run(["gcc", "-c", "-fPIC", "-o", str(out["empty"]), str(d / "empty.c")], check=True)
    subprocess.run(["gcc", "-c", "-o", str(out["main"]), str(d / "main.c")], check=True)
    subprocess.run(["gcc", "-m32", "-c", "-fPIC", "-o", str(out["empty32"]), str(d / "empty.c")], check=True)
    return out


@pytest.fixture
def build(tmp_path, objects) -> Builder:
    root = tmp_path / "tree"
    root.mkdir()
    return Builder(root, objects)


SCHEMA = json.loads((ROOT / "docs/reference/schema/closure-audit-3.schema.json").read_text())


def validate(report: dict) -> None:
    """Check a report against the JSON contract, docs/reference/schema/closure-audit-3.schema.json."""
    import jsonschema

    jsonschema.validate(report, SCHEMA)


def run_cli(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """Run closure-audit as a user would: a separate process, no TTY. Every
    --json report it prints (exit status 0 or 1) is checked against the
    schema, so each test that reads one checks the contract too."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "closure_audit", *args], capture_output=True,
                       text=True, env=e, timeout=kw.pop("timeout", 120), **kw)
    if "--json" in args and "--help" not in args and p.returncode in (0, 1):
        validate(json.loads(p.stdout))
    return p


def cli_json(*args, **kw):
    """Run a command with --json; every report is checked against the schema."""
    p = run_cli(*args, "--json", **kw)
    assert p.returncode in (0, 1), p.stderr
    report = json.loads(p.stdout)
    validate(report)
    return p, report


def fails_closed(args, *words, env=None):
    """Exit 2, one line on stderr naming every word, nothing on stdout."""
    p = run_cli(*args, env=env)
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert p.stdout == ""
    return lines[0]


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium, one for the session (tests/support/browser.py)."""
    from browser import Browser

    b = Browser()
    yield b
    b.close()
