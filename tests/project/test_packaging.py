"""The runtime needs exactly what the tools import: every third-party module
imported under tools/ is a declared dependency, and every dependency is
imported (test-only libraries such as pyelftools stay in the test extra)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from conftest import ROOT

LOCAL = {"closure_audit", "redist_features", "nixcuda_data"}


def imported_modules() -> set[str]:
    out = set()
    for path in (ROOT / "tools").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out.add(node.module.split(".")[0])
    return {m for m in out if m not in sys.stdlib_module_names and m not in LOCAL and m != "__future__"}


def test_runtime_dependencies_are_what_the_tools_import():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~ \[]", d)[0].lower() for d in project["dependencies"]}
    assert imported_modules() == declared
    test_extra = {re.split(r"[<>=!~ \[]", d)[0].lower() for d in project["optional-dependencies"]["test"]}
    assert "pyelftools" in test_extra and "pyelftools" not in declared
