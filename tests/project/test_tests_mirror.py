"""The tests mirror the package: each module of closure_audit's findings/
and cuda/ has its own test module beside the others of its folder, which
imports it and tests it directly (not only through whole commands):

  tools/closure_audit/<folder>/<module>.py        -> tests/<folder>/test_<module>.py
  tools/closure_audit/<folder>/<sub>/<module>.py  -> tests/<folder>/test_<sub>_<module>.py

An __init__.py that defines nothing (a docstring, imports) needs none; one
that defines a function or class is named as its package: test_<sub>.py.
A module whose test is named otherwise is in NAMED, with why; one whose
tests are still to come, in PENDING. No two test modules of the suite share
a basename: pytest imports them by it, and a test imports another's helpers
by it."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "tools/closure_audit"
TESTS = ROOT / "tests"
MIRRORED = ("findings", "cuda")

# module (relative to the package) -> its test module (relative to tests/), and why it is named so
NAMED = {
    "findings/doctor/__init__.py": ("findings/test_doctor_checks.py", "judge_doctor runs every check in order"),
    "findings/doctor/fixes.py": ("findings/test_doctor_fix_advice.py",
                                 "test_doctor_fixes.py is tests/commands', which applies the fixes to fake hosts"),
    "findings/trace.py": ("findings/test_trace_findings.py", "test_trace.py is tests/commands', the trace command's"),
}
# Modules whose tests are still to come.
PENDING: set[str] = set()


def modules() -> list[Path]:
    return sorted(p for folder in MIRRORED for p in (PACKAGE / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def defines_anything(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body)


def expected_test(module: Path) -> str | None:
    """The test module that must test `module` (relative to tests/); None where none is needed."""
    rel = module.relative_to(PACKAGE)
    if rel.as_posix() in NAMED:
        return NAMED[rel.as_posix()][0]
    folder, *subs = rel.parts[:-1]
    if rel.name == "__init__.py":
        if not defines_anything(module) or not subs:
            return None
        return f"{folder}/test_{'_'.join(subs)}.py"
    return f"{folder}/test_{'_'.join([*subs, rel.stem])}.py"


def imported(test: Path) -> set[str]:
    """The closure_audit modules a test module imports, dotted."""
    out = set()
    for node in ast.walk(ast.parse(test.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def dotted(module: Path) -> str:
    rel = module.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def test_the_mirrored_folders_are_found():
    assert len(modules()) > 25 and all((PACKAGE / f / "__init__.py").is_file() for f in MIRRORED)


def test_each_module_has_its_own_test_that_imports_it():
    missing, unimported = [], []
    for module in modules():
        rel = module.relative_to(PACKAGE).as_posix()
        test = expected_test(module)
        if test is None or rel in PENDING:
            continue
        if not (TESTS / test).is_file():
            missing.append(f"{rel} -> tests/{test}")
        elif dotted(module) not in imported(TESTS / test):
            unimported.append(f"tests/{test} does not import {dotted(module)}")
    assert not missing, f"modules without their test module: {missing}"
    assert not unimported, unimported


def test_the_exceptions_are_current():
    """A NAMED or PENDING entry names a module that exists; a pending module
    whose test has come leaves PENDING."""
    everything = {m.relative_to(PACKAGE).as_posix() for m in modules()}
    assert not (set(NAMED) | PENDING) - everything, (set(NAMED) | PENDING) - everything
    done = sorted(rel for rel in PENDING if (TESTS / expected_test(PACKAGE / rel)).is_file())
    assert not done, f"these have their test modules now: remove them from PENDING: {done}"


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1], sorted(
        str(p.relative_to(ROOT)) for p in TESTS.rglob("test_*.py") if names[p.name] > 1)
