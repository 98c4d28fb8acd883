"""Command line: parse, dispatch to commands/, turn user errors into one line.

Exit status: 0 no finding of severity error, 1 at least one (for `why
PATTERN`: no path matched), 2 usage or input errors (always one line on
stderr, never a traceback)."""

from __future__ import annotations

import argparse
import difflib
import functools
import importlib
import os
import re
import sys

from . import __version__
from .errors import InputError, UsageError

EXIT_USAGE = 2
# Each is a module of commands/ with HELP, add_arguments(parser) and run(args).
COMMANDS = ("audit", "why", "size", "diff", "gate", "archs", "report", "doctor", "why-build")


class _Formatter(argparse.HelpFormatter):
    """argparse's help, its width found once: argparse makes a formatter for
    every argument it is given and asks shutil (and so imports it, with its
    compression modules) for the terminal's size each time."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, width if width is not None else _width())


@functools.cache
def _width() -> int:
    """What shutil.get_terminal_size() gives argparse, less its 2 columns."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return (columns if columns > 0 else 80) - 2


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, exit 2
        raise UsageError(message)


def command(name: str):
    return importlib.import_module(f".commands.{name.replace('-', '_')}", __package__)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `only` (a command), that command alone is set
    up: argparse makes a parser and a help formatter per command and per
    argument, milliseconds that a command starting in tens of them should
    not spend on the others."""
    p = _Parser(prog="closure-audit",
                description="Audit ELF trees and Nix closures the way the dynamic loader and Nix see them.")
    p.add_argument("--version", action="version", version=f"closure-audit {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    for name in [only] if only in COMMANDS else COMMANDS:
        module = command(name)
        module.add_arguments(sub.add_parser(name, help=module.HELP))
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `closure-audit PATH` means `closure-audit audit PATH`.
    try:
        if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
            _not_a_command(argv[0])
            argv.insert(0, "audit")
        args = build_parser(argv[0] if argv else None).parse_args(argv)
        if args.command is None:
            raise UsageError("a command or a target is required (try --help)")
        status = command(args.command).run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except InputError as exc:
        print(f"closure-audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("closure-audit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly; nothing is flushed at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_USAGE


def _not_a_command(word: str) -> None:
    """A word that looks like a command and names no file is a mistyped
    command, not a target: `closure-audit why-biuld` must not audit a file
    of that name."""
    if os.path.lexists(word) or not re.fullmatch(r"[a-z]+(-[a-z]+)*", word):
        return
    close = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f" (commands: {', '.join(COMMANDS)})"
    raise UsageError(f"'{word}' is not a command, nor a file to audit{hint}")


if __name__ == "__main__":
    sys.exit(main())
