"""The version of every document closure-audit reads or writes, each named
once. A document's docs page says what a version change means."""

REPORT = "closure-audit/3"  # every command's --json output (docs/reference/json.md)
POLICY = "closure-audit-policy/1"  # policy files (docs/reference/policy.md)
BUDGETS = "closure-audit-budgets/1"  # the gate's budgets files (docs/commands/gate.md)
