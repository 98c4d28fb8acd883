"""The scale benchmark's synthetic dumps (benchmarks/gen_dumps.py) are what
its docstring says: one root that reaches every path, cycles between outputs
where asked for, the paths in Nix's order."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def test_cycles_stay_reachable_from_the_root(tmp_path):
    """At 20,000 paths a lib and dev that reference only each other were left
    out of the root's closure, and --closure-size's own check failed."""
    out = tmp_path / "dump.json"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/gen_dumps.py"), "--paths", "20000", "--cycles",
                        "--closure-size", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    dump = json.loads(out.read_bytes())
    assert list(dump) == sorted(dump)  # as Nix writes them
    (root,) = [path for path in dump if path.endswith("-nixos-system-synthetic-24.11")]
    seen, todo = {root}, [root]
    while todo:
        for ref in dump[todo.pop()]["references"]:
            if ref not in seen:
                seen.add(ref)
                todo.append(ref)
    assert seen == set(dump)
    assert dump[root]["closureSize"] == sum(e["narSize"] for e in dump.values())
    pairs = [(a, b) for a, e in dump.items() for b in e["references"] if a < b and a in dump[b]["references"]]
    assert len(pairs) > 10
