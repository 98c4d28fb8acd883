"""Command line: parse, dispatch to commands/, turn user errors into one line.

Exit status: 0 no finding of severity error (`trace`: its command's), 1 at
least one (`why PATTERN`: no path matched), 2 usage or input errors (always
one line on stderr, never a traceback). When the reader of standard output goes away
(`| head`), the process ends by SIGPIPE, as Unix tools do (a shell shows 141)."""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import re
import sys

from . import __version__
from .errors import Exit, InputError, UsageError
from .util import reader_gone

# The registry: each command, a module of commands/ with add_arguments(parser)
# and run(args), and its one-line summary for `--help`.
#
# Start-up rule: `closure-audit --help` and `archs` start in tens of
# milliseconds (benchmarks/bench_scale.py times them, tests/project/test_startup.py
# checks what they import), so a module is imported where it is used:
# - cli.py imports the one command module that runs (for its `--help` too) and
#   none for `closure-audit --help`: the summaries are here.
# - A command module is imported for its `--help`: at its top it imports only
#   light modules (commands/options.py, output/__init__.py, markdown.py,
#   progress.py); its run() imports the ops/ module it calls and any heavier
#   one it uses; output.show() imports the view it draws (rich for a terminal).
# - Every other module imports at its top, except, inside the function that
#   needs them, what a light path would pay for without using it: numpy and
#   igraph (closure/graph.py and what imports it), orjson, rich, zstandard,
#   lz4, zipfile, tomllib, multiprocessing, nix/command.py (shutil, subprocess),
#   dataclasses, nixcuda_data (where its table is read), difflib for one
#   message, and the audit's readers in `doctor` without a target.
COMMANDS = {
    "audit": "resolve every needed library of every ELF file in the targets",
    "why": "why paths are in a closure: chains and byte-level evidence",
    "size": "NAR, closure and added size of every path of a closure",
    "diff": "compare two closures package by package",
    "gate": "fail CI when a closure breaks its budgets",
    "archs": "GPU code inside fat binaries: architectures, sizes, what is missing or unused",
    "report": "write one self-contained HTML page: a treemap of added sizes, the forbidden chains, "
              "every path's details",
    "doctor": "will CUDA programs of the targets run on this host: driver, versions, GPUs, GPU code",
    "why-build": "what Nix will build instead of download for TARGET, and (with --like) the setting that "
                 "caused it",
    "trace": "run a command and list what the real loader loaded, from where, and what is wrong with it",
    "survey": "judge every job of an evaluation (nix-eval-jobs lines): closures, forbidden paths, GPU code, "
              "regressions against an earlier survey",
}


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
    up, with its arguments: argparse makes a parser and a help formatter per
    command and per argument, milliseconds that a command starting in tens of
    them should not spend on the others. Without it, every command is listed
    by its summary and no command module is imported."""
    p = _Parser(prog="closure-audit",
                description="Audit ELF trees and Nix closures the way the dynamic loader and Nix see them.",
                epilog="`closure-audit [OPTION...] TARGET...` is `closure-audit audit`.")
    p.add_argument("--version", action="version", version=f"closure-audit {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    for name in [only] if only in COMMANDS else COMMANDS:
        parser = sub.add_parser(name, help=COMMANDS[name])
        if name == only:
            command(name).add_arguments(parser)
    return p


def _with_command(argv: list[str]) -> list[str]:
    """The arguments with a command first: `closure-audit PATH` and
    `closure-audit --json PATH` mean `closure-audit audit ...`; options may
    come before the command (`closure-audit --json size X`). A word that is
    neither a command nor an existing path is taken for a mistyped command."""
    if not argv or argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    if argv[0].startswith("-"):
        i = next((i for i, a in enumerate(argv) if a in COMMANDS), None)
        if i is not None:
            return [argv[i], *argv[:i], *argv[i + 1:]]
        return argv if "-h" in argv or "--help" in argv else ["audit", *argv]
    word = argv[0]
    if re.fullmatch(r"[A-Za-z][\w-]*", word) and not os.path.lexists(word):  # not ./path, .#attr, /nix/...
        import difflib  # only for this message: start-up stays lean

        close = difflib.get_close_matches(word, COMMANDS, n=1)
        hint = f"did you mean {close[0]}?" if close else \
            f"commands: {', '.join(COMMANDS)}; or an existing path to audit"
        raise UsageError(f"unknown command '{word}' ({hint})")
    return ["audit", *argv]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = _with_command(argv)
        args = build_parser(argv[0] if argv else None).parse_args(argv)
        if args.command is None:
            raise UsageError("a command or a target is required (try --help)")
        status = command(args.command).run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except InputError as exc:
        print(f"closure-audit: error: {exc}", file=sys.stderr)
        return Exit.USAGE
    except KeyboardInterrupt:
        print("closure-audit: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        return reader_gone()
