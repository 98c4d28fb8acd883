"""The first example of each command's page runs: docs/CMD.md where the
command has a page, else README.md. Placeholders (TARGET, OLD, NEW, ...)
stand for a `result` link to a real store closure built here, with the
files the examples name beside it."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from conftest import ROOT, run_cli
from nixstore import needs_nix, nix_build
from closures import FIXTURE
from docpages import examples, until_shell
from closure_audit.cli import COMMANDS

pytestmark = needs_nix

PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*(\.\.\.)?")


def first_example(command: str) -> tuple[str, int, list[str]]:
    page = ROOT / "docs/commands" / f"{command}.md"
    page = page if page.exists() else ROOT / "README.md"
    for number, words, whole in examples(page):
        if whole and words[:1] == [command]:
            return f"{page.relative_to(ROOT)}:{number}", number, words
    raise AssertionError(f"{page.relative_to(ROOT)} has no example of `closure-audit {command}`")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory holding `result` (a store closure with forbidden paths), the
    budgets file of ci/, a gate report saved as a baseline, and an evaluation
    of `result` as nix-eval-jobs writes one."""
    d = tmp_path_factory.mktemp("examples")
    (d / "result").symlink_to(nix_build(d, FIXTURE, attr="torch")[0])
    (d / "ci").mkdir()
    shutil.copy(ROOT / "ci/closure-budgets.toml", d / "ci/closure-budgets.toml")
    (d / "baseline").mkdir()
    p = run_cli("gate", "--budgets", "ci/closure-budgets.toml", "--target", "torch=./result", "--json", cwd=d)
    assert p.returncode in (0, 1), p.stderr
    (d / "baseline/gate.json").write_text(p.stdout)
    # survey's evaluation: one job, nix-eval-jobs' line for that closure.
    job = {"attr": "torch", "attrPath": ["torch"], "outputs": {"out": os.path.realpath(d / "result")}}
    (d / "eval.jsonl").write_text(json.dumps(job) + "\n")
    return d


@pytest.mark.parametrize("command", COMMANDS)
def test_the_first_example_of_each_command_runs(workdir, command):
    where, _, words = first_example(command)
    argv = ["./result" if PLACEHOLDER.fullmatch(w) else w for w in until_shell(words)]
    rest = words[len(until_shell(words)):]
    p = run_cli(*argv, cwd=workdir, env={"NIX_CONFIG": "substituters ="}, timeout=600)
    assert p.returncode in (0, 1) and "error:" not in p.stderr and "Traceback" not in p.stderr, \
        f"{where}: closure-audit {' '.join(words)}\n{p.stderr}"
    if rest[:1] == [">"]:  # the example saves standard output: what it saves is a report
        (workdir / rest[1]).write_text(p.stdout)
    for option in ("-o", "--output", "--markdown", "--html"):
        if option in argv and argv[argv.index(option) + 1] != "-":
            assert os.path.getsize(workdir / argv[argv.index(option) + 1]) > 0, where
