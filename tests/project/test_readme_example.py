"""The built-in example the README's first command audits."""

from __future__ import annotations

import pytest

import json
import subprocess

from conftest import ROOT, run_cli

pytestmark = pytest.mark.fhs


def test_example_tree_shows_each_mistake(tmp_path):
    out = tmp_path / "example"
    subprocess.run([str(ROOT / "examples/torch-like-tree.sh"), str(out)], check=True, capture_output=True)
    p = run_cli("audit", "--json", str(out))
    assert p.returncode == 1
    found = sorted((f["rule"], f["file"].rsplit("/", 1)[1]) for f in json.loads(p.stdout)["findings"])
    assert found == [
        ("needs-preloaded-library", "libcusolverMg.so.12"),
        ("runpath-empty-entry", "libnvshmem_host.so.3"),
        ("runpath-impure", "nvshmem_bootstrap_mpi.so.3"),
        ("stub-in-runpath", "libnvshmem_host.so.3"),
        ("unresolved-library", "nvshmem_bootstrap_mpi.so.3"),
    ]
