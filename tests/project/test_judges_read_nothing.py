"""Read, then judge: a module of findings/ takes the records the reading
layers made (elf/, closure/, loader/, host/, policy/) and gives findings; it
reads no file itself. The test walks each module's AST and fails on an
import of a reader (a name that reads: read_*, load_*, scan_*, *Reader,
*Scanner, a file's hash, the evidence scanner, the tree walk) and on a call
that touches the file system (open(), os.walk, os.path.exists, Path.read_text,
tomllib.load, ...), naming the file and line."""

from __future__ import annotations

import ast
import re

from conftest import ROOT
from test_layers import imported

PACKAGE = ROOT / "tools/closure_audit"
JUDGES = PACKAGE / "findings"

# Modules that do nothing but read: no name of theirs belongs in a judge.
READING_MODULES = {("closure", "evidence"), ("elf", "walk"), ("elf", "search"), ("elf", "stream"),
                   ("cache", "nar")}
READER_NAME = re.compile(r"^(read|load|scan|walk)_|(Reader|Scanner)$")
READER_NAMES = {"sha256", "kernels_of", "scanner_for", "names_in", "parse_elf", "probe", "find_library",
                "find_driver", "version_string", "host_library_dirs"}
CALLS = {"open", "io.open", "os.open", "os.walk", "os.scandir", "os.listdir", "os.stat", "os.lstat",
         "os.readlink", "os.path.exists", "os.path.lexists", "os.path.isfile", "os.path.isdir",
         "os.path.islink", "os.path.realpath", "os.path.getsize", "tomllib.load", "tomllib.loads", "mmap.mmap",
         "subprocess.run", "subprocess.Popen", "subprocess.check_output"}
PATH_METHODS = {"read_text", "read_bytes", "iterdir", "rglob", "glob", "open"}

# Reads still left in judges, each to move to the reading side; the list
# only shrinks (an entry that is gone fails too, so it is taken off).
LEFT = {
    ("findings/dists.py", "sha256"),  # the bytes on disk of a file two RECORDs claim
    ("findings/dists.py", "os.path.getsize"),  # and its size, first
    ("findings/processes.py", "sha256"),  # identical copies of a library in one process
    ("findings/processes.py", "os.path.getsize"),  # and their sizes, first
    ("findings/gpu.py", "kernels_of"),  # the kernels of a fat binary's entries, read when compared
    ("findings/loading.py", "os.path.exists"),  # whether an installed file of a RECORD is there
    ("findings/orders.py", "os.path.realpath"),  # a resolution's file when the model kept no target
}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def reads(tree: ast.AST, package: list[str]) -> list[tuple[int, str]]:
    """(line, what) of every reader imported and every file-system call."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for parts in imported(node, package):
                # `from ..closure import evidence` names the module too.
                names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
                for whole in [parts, *(parts + [n] for n in names)]:
                    if tuple(whole[:2]) in READING_MODULES:
                        out.append((node.lineno, ".".join(whole[:2])))
                        break
            if isinstance(node, ast.ImportFrom):
                out += [(node.lineno, a.name) for a in node.names
                        if READER_NAME.search(a.name) or a.name in READER_NAMES]
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in CALLS:
                out.append((node.lineno, name))
            elif (isinstance(node.func, ast.Attribute) and node.func.attr in PATH_METHODS
                  and name not in CALLS and not (name or "").startswith(("os.", "self.", "f.", "tomllib."))):
                out.append((node.lineno, f".{node.func.attr}()"))
    return sorted(out)


def found() -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(JUDGES.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        for line, what in reads(ast.parse(path.read_text()), list(rel.parent.parts)):
            out.setdefault((rel.as_posix(), what), []).append(line)
    return out


def test_judges_read_no_file():
    got = found()
    new = [f"tools/closure_audit/{file}:{lines[0]}: {what}" for (file, what), lines in got.items()
           if (file, what) not in LEFT]
    assert not new, f"read in the reading layers, and give the judge the records: {new}"
    gone = LEFT - set(got)
    assert not gone, f"no longer read here: take them off LEFT: {sorted(gone)}"


def test_the_check_sees_each_way_of_reading():
    source = """
from ..elf.strings import NameReader, NoteEntry
from ..closure.evidence import Hit
from ..closure import evidence
from ..util import read_toml, format_size
from ..elf.dists import Distribution, sha256
import os, tomllib
from pathlib import Path
def judge(p):
    with open(p) as f:
        pass
    os.walk(p)
    os.path.exists(p)
    Path(p).read_text()
    tomllib.load(f)
    p.open()
    len(p)
    os.path.join(p, "x")
"""
    got = [what for _, what in reads(ast.parse(source), ["findings"])]
    assert got == ["NameReader", "closure.evidence", "closure.evidence", "read_toml", "sha256", "open", "os.walk",
                   "os.path.exists", ".read_text()", "tomllib.load", ".open()"]


def test_every_judge_says_what_it_takes_and_what_it_gives():
    """Each module of findings/ opens with a docstring, and the judges'
    say in so many words what they take and what they give."""
    missing = []
    for path in sorted(JUDGES.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if not doc:
            missing.append(f"{path.relative_to(ROOT)}: no docstring")
        elif path.name != "__init__.py" and not ("Takes" in doc and "Gives" in doc):
            missing.append(f"{path.relative_to(ROOT)}: no Takes/Gives")
    assert not missing, missing
