"""No module of the Python packages over 450 lines: a module that grows past
it holds more than one job, and is split by what its parts do (the doctor's
checks, the loader's environment and search, a fat binary's listing and its
payloads), never cut at a line count."""

from __future__ import annotations

from conftest import ROOT

LIMIT = 450


def test_every_module_is_at_most_450_lines():
    sizes = {str(p.relative_to(ROOT)): sum(1 for _ in p.open(encoding="utf-8"))
             for p in sorted((ROOT / "tools").rglob("*.py"))}
    assert len(sizes) > 100, "the packages were not found"
    over = {p: n for p, n in sizes.items() if n > LIMIT}
    assert not over, f"modules over {LIMIT} lines: {over}"
