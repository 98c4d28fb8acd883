"""`size --all` computes the closure size of every path a dump gives none
for, which is quadratic: past closure/sizes.py's MAX_STEPS it is refused up
front, with what will do instead; a dump that carries Nix's closure sizes, or
a --top listing, is never refused."""

from __future__ import annotations

import json

import pytest

import synthetic
from closure_audit.closure.graph import load_closure
from closure_audit.errors import UsageError
from closure_audit.ops import size


def dump(tmp_path, with_sizes: bool):
    path = tmp_path / "dump.json"
    root = synthetic.write(str(path), 3000, seed=3)
    data = json.loads(path.read_text())
    for info in (data.values() if isinstance(data, dict) else data):
        if with_sizes:
            info["closureSize"] = info["narSize"]  # any figure: Nix's is taken as it is
        else:
            info.pop("closureSize", None)
    path.write_text(json.dumps(data))
    return load_closure([root], str(path))


def test_every_closure_size_past_the_limit_is_refused_up_front(tmp_path, monkeypatch):
    closure = dump(tmp_path, with_sizes=False)
    monkeypatch.setattr(size, "MAX_STEPS", 3000 * 3000 // 64 - 1)
    with pytest.raises(UsageError, match=r"size --all: 3,000 paths have no closure size .* --closure-size.* --top N"):
        size.run(size.Options(closure, None))
    assert len(size.run(size.Options(closure, 25)).rows) == 25  # the largest few: never refused


def test_under_the_limit_or_with_nix_sizes_every_path_is_listed(tmp_path, monkeypatch):
    closure = dump(tmp_path, with_sizes=False)
    assert len(size.run(size.Options(closure, None)).rows) == 3000
    monkeypatch.setattr(size, "MAX_STEPS", 0)
    assert len(size.run(size.Options(dump(tmp_path, with_sizes=True), None)).rows) == 3000


def test_a_saved_dump_past_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch, capsys):
    """At a million paths the read alone takes seconds: `size --all` of a
    saved dump without closure sizes is refused from a count of its entries,
    before the dump is read; one with Nix's closure sizes is read and listed."""
    from closure_audit.cli import main
    from closure_audit.closure import graph

    dump(tmp_path, with_sizes=False)
    file = str(tmp_path / "dump.json")
    monkeypatch.setattr(size, "MAX_STEPS", 3000 * 3000 // 64 - 1)
    read = graph.load_dump
    monkeypatch.setattr(graph, "load_dump", lambda *a: pytest.fail("the dump was read"))
    assert main(["size", "--path-info", file, "--all"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "3,000 paths have no closure size" in err and "--top N" in err
    monkeypatch.setattr(graph, "load_dump", read)
    dump(tmp_path, with_sizes=True)
    monkeypatch.setattr(size, "MAX_STEPS", 0)
    assert main(["size", "--path-info", file, "--all", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["paths"]) == 3000
