"""One function per command that runs its pipeline, read → resolve → judge,
on an options value: no argparse, no printing. commands/ turns the command
line into the options and hands the result to output.show().

Every run() returns its module's Result, a named tuple with two more
attributes: `command`, which output.show() renders it by, and `failed`,
which gives the exit status (output.show: the one rule).

What it may import: the README's architecture table.
"""

from collections import namedtuple

from ..findings.rules import has_error


def _has_error(result) -> bool:
    return has_error(result.findings)


def result_type(command: str, fields: str, doc: str, failed=_has_error, defaults=()) -> type:
    """A command's Result: a named tuple of `fields` (a named tuple of
    collections: `archs` starts without dataclasses, docs/engineering/scale.md) with
    `command` and `failed`, a property computed by `failed(result)`: by
    default, a finding of severity error."""
    base = namedtuple("Result", fields, defaults=defaults)
    return type("Result", (base,), {"__slots__": (), "__doc__": doc, "command": command,
                                    "failed": property(failed)})
