"""What each command imports: `--help` and `archs` start without the graph
libraries (numpy, igraph, orjson) that only the closure commands need, so
they start in tens of milliseconds (benchmarks/bench_scale.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

HEAVY = ("numpy", "igraph", "orjson", "networkx", "rich")
PROBE = """
import json, sys
from closure_audit import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def loaded(*argv: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"})
    return json.loads(p.stderr.strip().splitlines()[-1])


def test_help_and_archs_import_nothing_heavy(build, tmp_path):
    lib = build.lib("lib/libsmall.so")
    assert loaded("--help") == []
    assert loaded("size", "--help") == []
    assert loaded("archs", str(lib), "--json") == []


def test_the_closure_commands_load_the_graph_libraries(tmp_path):
    """The probe sees imports: a closure command on a dump loads numpy and igraph."""
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"/nix/store/" + "a" * 32 + "-x": {"narSize": 1, "references": []}}))
    assert {"numpy", "igraph", "orjson"} <= set(loaded("size", "--path-info", str(dump)))
