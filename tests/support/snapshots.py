"""Snapshots of what users read: a command's terminal and JSON output on a
fixture, kept in tests/snapshots/ and compared byte for byte, so a change of
wording or of a figure shows up as a diff to review.

`pytest --update-snapshots` rewrites the snapshots that differ (and writes
missing ones); without it a missing or different snapshot fails the test.
What differs from run to run (the temporary directory, the package's version)
is replaced by a placeholder first.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

DIRECTORY = Path(__file__).resolve().parent.parent / "snapshots"


def scrub(text: str, places: dict[str, str]) -> str:
    """`text` with each place (a temporary directory) replaced by its
    placeholder, longest first."""
    for place, placeholder in sorted(places.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(place, placeholder)
    return text


def json_text(stdout: str) -> str:
    """A JSON report, its keys as written, indented: one value a line, so a
    snapshot's diff names the value that changed. The tool's version is
    <version>: a release changes it, not what the report says."""
    report = json.loads(stdout)
    if isinstance(report.get("tool"), dict) and "version" in report["tool"]:
        report["tool"]["version"] = "<version>"
    return json.dumps(report, indent=1, ensure_ascii=False) + "\n"


def check(request, name: str, text: str) -> None:
    """Compare `text` with tests/snapshots/NAME; with --update-snapshots,
    write it there when it differs."""
    path = DIRECTORY / name
    old = path.read_text() if path.exists() else None
    if old == text:
        return
    if request.config.getoption("--update-snapshots"):
        DIRECTORY.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if old is None:
        pytest.fail(f"no snapshot tests/snapshots/{name}: run pytest --update-snapshots and review it")
    diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), f"snapshots/{name}", "now"))
    pytest.fail(f"output differs from tests/snapshots/{name} (pytest --update-snapshots after review):\n{diff}")
