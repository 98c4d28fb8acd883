"""The layers of tools/closure_audit/ as the README's architecture table
allows them: every import, absolute or relative (`from .. import x`
included), is checked against the table, and a disallowed one is named with
its file and line."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from conftest import ROOT

PACKAGE = "closure_audit"


def allowed_table(readme: str) -> dict[str, set[str]]:
    """The README's "| folder | may import |" table: unit -> the units it may import."""
    section = readme.split("## Architecture", 1)[1]
    rows = re.findall(r"^\| ([a-z_]+) \| ([a-z_, ]+) \|$", section, re.M)
    return {unit: {u.strip() for u in allowed.split(",")} for unit, allowed in rows if unit != "folder"}


# Modules at the top of the package that are a unit of their own, not foundations.
OWN_UNIT = ("targets",)


def unit_of(parts: list[str], top: Path) -> str:
    """The unit a module path inside the package belongs to."""
    if not parts:
        return "foundations"
    if parts[0] in ("cli", "__main__"):
        return "cli"
    if parts[0] in OWN_UNIT:
        return parts[0]
    return parts[0] if (top / parts[0]).is_dir() else "foundations"


def imported(node: ast.AST, package: list[str]) -> list[list[str]]:
    """The module paths inside the package that one import statement names;
    `package` is the importing module's package, for relative imports."""
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == PACKAGE]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        if not node.module or node.module.split(".")[0] != PACKAGE:
            return []
        base = node.module.split(".")[1:]
    else:
        if node.level - 1 > len(package):
            return []
        base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    # `from . import x` and `from closure_audit import x` name modules or packages.
    return [base + [a.name] for a in node.names] if not base or not node.module else [base]


def violations(top: Path, table: dict[str, set[str]]) -> list[str]:
    found = []
    for path in sorted(top.rglob("*.py")):
        rel = path.relative_to(top).with_suffix("").parts
        source = unit_of(list(rel), top) if len(rel) == 1 else rel[0]
        package = list(rel[:-1])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for parts in imported(node, package):
                target = unit_of(parts, top)
                if target != source and target not in table.get(source, set()):
                    found.append(f"{path.relative_to(top.parent)}:{node.lineno}: {source} imports {target}")
    return found


def test_every_import_is_one_the_table_allows():
    top = ROOT / "tools" / PACKAGE
    table = allowed_table((ROOT / "README.md").read_text())
    units = {p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert set(table) == units | {"foundations", "cli", *OWN_UNIT}, "the table names every folder, no more"
    assert violations(top, table) == []


def test_an_elf_module_importing_output_fails(tmp_path):
    """The check can fail: a copy of the package where elf/ imports output/,
    written three ways."""
    top = tmp_path / PACKAGE
    shutil.copytree(ROOT / "tools" / PACKAGE, top)
    (top / "elf/leak.py").write_text("import sys\nfrom ..output import terminal\n"
                                     "from closure_audit.output.json_report import dumps\n"
                                     "from .. import output\n")
    table = allowed_table((ROOT / "README.md").read_text())
    assert violations(top, table) == [f"{PACKAGE}/elf/leak.py:{n}: elf imports output" for n in (2, 3, 4)]


def test_each_form_of_import_names_its_module():
    forms = {
        "from . import reader": [["elf", "reader"]],
        "from .. import output": [["output"]],
        "from ..output.terminal import table": [["output", "terminal"]],
        "from .reader import read_elf": [["elf", "reader"]],
        "import closure_audit.output.html": [["output", "html"]],
        "from closure_audit import errors": [["errors"]],
        "import numpy": [],
        "from numpy import array": [],
    }
    for source, expected in forms.items():
        assert imported(ast.parse(source).body[0], ["elf"]) == expected, source


def test_no_module_outgrows_one_job():
    """A module over 500 lines (cli.py: 150, the registry and dispatch alone)
    is doing more than one job: split it before it lands."""
    limits = {ROOT / "tools/closure_audit/cli.py": 150}
    too_long = [f"{p.relative_to(ROOT)}: {n} lines (at most {limits.get(p, 500)})"
                for p in sorted((ROOT / "tools").rglob("*.py"))
                if (n := len(p.read_text().splitlines())) > limits.get(p, 500)]
    assert not too_long, "\n".join(too_long)
