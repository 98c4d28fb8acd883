"""Which GPU code runs on which GPU (closure_audit.cuda.code), and the GPU check's
coverage decision."""

from __future__ import annotations

import pytest

from closure_audit.cuda.code import Code, covers, parse_capability, parse_code, runs_on, serves


@pytest.mark.parametrize("name, code", [
    ("sm_86", Code("sm", 8, 6)), ("sm_90a", Code("sm", 9, 0, "a")), ("compute_100f", Code("compute", 10, 0, "f")),
    ("sm_121", Code("sm", 12, 1)), ("lto_90", Code("lto", 9, 0)), ("sm_110f", Code("sm", 11, 0, "f")),
])
def test_parse(name, code):
    assert parse_code(name) == code and code.name == name


@pytest.mark.parametrize("bad", ["sm86", "gfx90a", "sm_", "compute_9", "sm_90x"])
def test_parse_rejects(bad):
    assert parse_code(bad) is None


@pytest.mark.parametrize("code, device, ok", [
    ("sm_80", (8, 6), True),     # a cubin runs on later minors of its major
    ("sm_86", (8, 0), False),
    ("sm_80", (9, 0), False),    # ... never across majors
    ("sm_90a", (9, 0), True),    # architecture-specific: that GPU only
    ("sm_90a", (10, 0), False),
    ("sm_100f", (10, 0), True),  # family-specific: its family at or above it
    ("sm_100f", (10, 3), True),
    ("sm_100f", (10, 1), False),  # 10.1 (Jetson Thor under CUDA 12) is a family of its own
    ("sm_100f", (12, 0), False),
    ("sm_120f", (12, 1), True),
    ("compute_75", (12, 1), True),  # PTX compiles for anything newer
    ("compute_90", (8, 9), False),
    ("compute_90a", (10, 0), False),
    ("lto_90", (9, 0), False),    # link-time IR never runs
])
def test_runs_on(code, device, ok):
    assert runs_on(parse_code(code), device) is ok


@pytest.mark.parametrize("code, device, ok", [
    ("lto_75", (8, 6), True),    # nvJitLink links LTO IR for its GPU and newer ones, as PTX compiles
    ("lto_90", (8, 6), False),
    ("lto_100f", (10, 3), True),
    ("lto_100f", (12, 0), False),
    ("sm_80", (8, 6), True),     # cubins and PTX: as runs_on
    ("compute_90", (8, 9), False),
])
def test_serves(code, device, ok):
    assert serves(parse_code(code), device) is ok


def test_covers_prefers_cubins():
    built = [parse_code(n) for n in ("sm_80", "sm_90", "compute_90", "sm_90a")]
    assert [c.name for c in covers(built, (9, 0))] == ["sm_90a", "sm_90", "compute_90"]
    assert [c.name for c in covers(built, (8, 9))] == ["sm_80"]
    assert covers(built, (7, 5)) == []
    assert [c.name for c in covers(built, (12, 0))] == ["compute_90"]


def test_parse_capability():
    assert parse_capability("10.0f") == (10, 0, "f") and parse_capability(" 8.6") == (8, 6, "")
    with pytest.raises(ValueError, match="not a CUDA capability"):
        parse_capability("sm_86")
