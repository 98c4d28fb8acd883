"""Report: JSON (the contract in docs/json.md), the terminal and Markdown.

Takes finished results, and never decides anything a gate depends on. What
it may import: the README's architecture table.
"""

from __future__ import annotations

from collections.abc import Callable

from .json_report import emit


def show(as_json: bool, document: Callable[[], dict], render: Callable) -> None:
    """Print the JSON document, or `render(output.terminal)` for a person:
    rich loads only then (the start-up rule: cli.py)."""
    if as_json:
        emit(document())
    else:
        from . import terminal

        render(terminal)
