"""cuda/data.py on its own: the tables of lib/data as the installed
package reads them (the nixcuda_data package), byte for byte the
repository's, and a name no table has refused in one sentence."""

from __future__ import annotations

import json

import pytest

from closure_audit.cuda import data
from conftest import ROOT

TABLES = sorted(p.name for p in (ROOT / "lib/data").iterdir() if p.is_file())


@pytest.mark.parametrize("name", TABLES)
def test_each_table_reads_as_the_repositorys(name):
    assert data.text(name) == (ROOT / "lib/data" / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        assert data.table(name) == json.loads((ROOT / "lib/data" / name).read_text())
        assert data.table(name) is data.table(name)  # read once


def test_a_table_that_is_not_installed():
    with pytest.raises(FileNotFoundError, match="no-such-table.json is in none of"):
        data.text("no-such-table.json")
