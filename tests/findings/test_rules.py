"""The rule catalogue against the JSON contract: each rule's declared fields
are exactly what the schema requires of its findings, and the schema names
no rule the catalogue lacks. Every report the suite reads is validated
against the schema (conftest.run_cli), so a finding that lacks a declared
field fails there."""

from __future__ import annotations

import json

from conftest import ROOT
from closure_audit.findings.rules import RULES

SCHEMA = json.loads((ROOT / "docs/reference/schema/closure-audit-3.schema.json").read_text())


def required_by_schema() -> dict[str, set[str]]:
    """Each rule's required fields: the union over the clauses naming it."""
    out: dict[str, set[str]] = {}
    for clause in SCHEMA["$defs"]["finding"]["allOf"]:
        rule = clause["if"]["properties"]["rule"]
        for name in [rule["const"]] if "const" in rule else rule["enum"]:
            out.setdefault(name, set()).update(clause["then"].get("required", []))
    return out


def test_each_rules_fields_are_what_the_schema_requires():
    schema = required_by_schema()
    assert not set(schema) - set(RULES), f"the schema names rules the catalogue lacks: {set(schema) - set(RULES)}"
    wrong = {rule.id: (sorted(rule.fields), sorted(schema.get(rule.id, set())))
             for rule in RULES.values() if set(rule.fields) != schema.get(rule.id, set())}
    assert not wrong, f"Rule.fields against the schema's required fields: {wrong}"


def test_declared_fields_are_unique_and_not_the_common_ones():
    for rule in RULES.values():
        assert len(set(rule.fields)) == len(rule.fields), rule.id
        assert not set(rule.fields) & {"rule", "severity", "message", "file"}, rule.id
