"""PTX ISA versions against drivers (NVIDIA's PTX ISA release history) and
the driver versions `--driver` reads."""

from __future__ import annotations

import pytest

from closure_audit.cuda.ptx import newest_isa, parse_driver


def test_newest_isa_of_a_driver():
    assert newest_isa((13, 0)) == (9, 0)
    assert newest_isa((12, 8)) == (8, 7)
    assert newest_isa((12, 6)) == (8, 5)  # 8.6 came with 12.7
    assert newest_isa((11, 8)) == (7, 8)
    assert newest_isa((8, 0)) == (0, 0)


@pytest.mark.parametrize("text, cuda", [("13.0", (13, 0)), ("12", (12, 0)), ("12.8", (12, 8)),
                                        ("580.65.06", (13, 0)), ("575.51.03", (12, 9)), ("570.26", (12, 8)),
                                        ("570.25", (12, 6)), ("999.1", (13, 0))])
def test_parse_driver(text, cuda):
    assert parse_driver(text) == cuda


@pytest.mark.parametrize("text", ["", "13.x", "thirteen", "13.0.1", "-1", "470.57.02", "13.0 "[:-1] + "a"])
def test_not_a_driver(text):
    with pytest.raises(ValueError):
        parse_driver(text)
