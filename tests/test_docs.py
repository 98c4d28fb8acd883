"""The documentation agrees with the code where a reader relies on it."""

from __future__ import annotations

import re

from conftest import ROOT
from closure_audit.cli import COMMANDS, build_parser
from closure_audit.findings.rules import RULES


def test_the_rules_table_matches_the_catalogue():
    rows = re.findall(r"^\| `([a-z-]+)` \| (\S+) \| (\S+) \|", (ROOT / "docs/rules.md").read_text(), re.M)
    documented = {rule: (nix, tree) for rule, nix, tree in rows}
    assert set(documented) == set(RULES)
    for rule, (nix, tree) in documented.items():
        assert (nix, tree) == (RULES[rule].nix or "—", RULES[rule].tree or "—"), rule


def test_every_rule_has_a_section():
    text = (ROOT / "docs/rules.md").read_text()
    headings = {h.strip() for line in re.findall(r"^## (.+)$", text, re.M) for h in line.split(",")}
    assert set(RULES) <= headings


def test_every_command_that_prints_json_is_documented_in_the_json_contract():
    text = (ROOT / "docs/json.md").read_text()
    parsers = build_parser()._subparsers._group_actions[0].choices
    assert set(parsers) == set(COMMANDS)
    printing = {name for name, p in parsers.items() if "--json" in p._option_string_actions}
    assert printing == set(COMMANDS) - {"report"}  # report writes a page, no JSON
    assert set(re.findall(r"^## ([a-z-]+)$", text, re.M)) >= printing


def test_the_driver_table_is_the_documented_one():
    from closure_audit.loader.libraries import DRIVER_LIBRARIES

    text = (ROOT / "docs/loader.md").read_text()
    section = text.split("## Driver libraries", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (`[^|]+`) \|", section, re.M)
    documented = [p for row in rows for p in re.findall(r"`([^`]+)`", row)]
    assert documented == list(DRIVER_LIBRARIES)
