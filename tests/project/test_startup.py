"""What each command imports: `--help` and `archs` start without the graph
libraries (numpy, igraph, orjson) that only the closure commands need, and
without shutil (which argparse imports to measure the terminal for every
argument) or dataclasses (whose import and per-class code generation cost
`archs` about 15 of its 50 ms), so they start in tens of milliseconds
(benchmarks/bench_scale.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys


# typing too: a few of `--help`'s milliseconds, so the records on these paths
# are collections' named tuples.
HEAVY = ("numpy", "igraph", "orjson", "networkx", "rich", "shutil", "dataclasses", "typing")
PROBE = """
import json, sys
from closure_audit import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m in {heavy!r} or m.startswith("closure_audit.commands."))),
      file=sys.stderr)
"""


def modules(*argv: str) -> list[str]:
    """The heavy libraries and the command modules that `closure-audit ARGV` imported."""
    p = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"})
    return json.loads(p.stderr.strip().splitlines()[-1])


def loaded(*argv: str) -> list[str]:
    return [m for m in modules(*argv) if m in HEAVY]


def test_help_and_archs_import_nothing_heavy(build, tmp_path):
    lib = build.lib("lib/libsmall.so")
    assert loaded("--help") == []
    assert loaded("size", "--help") == []
    assert loaded("archs", str(lib), "--json") == []
    # The terminal view needs rich, which brings dataclasses and typing (docs/commands/archs.md).
    assert loaded("archs", str(lib)) == ["dataclasses", "rich", "typing"]


def test_help_imports_no_command_module():
    """cli.py's registry holds each command's summary: `--help` lists the
    commands without importing one, a command's `--help` imports its own only."""
    assert modules("--help") == []
    assert modules("size", "--help") == ["closure_audit.commands.options", "closure_audit.commands.size"]


def test_the_closure_commands_load_the_graph_libraries(tmp_path):
    """The probe sees imports: a closure command on a dump loads numpy and igraph."""
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"/nix/store/" + "a" * 32 + "-x": {"narSize": 1, "references": []}}))
    assert {"numpy", "igraph", "orjson"} <= set(loaded("size", "--path-info", str(dump)))


def test_help_fits_the_terminal_width_it_is_given():
    def help_text(columns: int) -> list[str]:
        p = subprocess.run([sys.executable, "-m", "closure_audit", "archs", "--help"], capture_output=True,
                           text=True, env={"PATH": "/usr/bin:/bin",
                                           "COLUMNS": str(columns)})
        assert p.returncode == 0
        return p.stdout.split("\n\n", 1)[1].splitlines()  # after the usage, which argparse cannot always wrap

    narrow, wide = help_text(50), help_text(120)
    assert max(map(len, narrow)) <= 50 < max(map(len, wide)) <= 120 and len(narrow) > len(wide)
