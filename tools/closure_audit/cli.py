"""Command line. Exit status: 0 no finding of severity error, 1 at least one,
2 usage or input errors (always one line on stderr, never a traceback)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
COMMANDS = ("audit",)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="closure-audit",
                description="Audit ELF trees and Nix closures the way the dynamic loader sees them.")
    p.add_argument("--version", action="version", version=f"closure-audit {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    a = sub.add_parser("audit", help="resolve every needed library of every ELF file in the targets",
                       description="Resolve every needed library of every ELF file in the targets.")
    a.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a directory, a file, a Nix store path or a result symlink")
    a.add_argument("--json", action="store_true", help="print the JSON report (docs/json.md)")
    a.add_argument("--policy", metavar="FILE", help="TOML policy (docs/policy.md)")
    a.add_argument("--tree", metavar="FILE", help="show the resolved dependency tree of one object")
    a.add_argument("--root", metavar="DIR", help="the tree libraries must resolve in (tree mode; "
                   "default: each directory target, or a lone file's venv or conda env)")
    a.add_argument("--driver-dir", metavar="DIR", action="append",
                   help="driver library directory (default /run/opengl-driver/lib); repeatable")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `closure-audit PATH` means `closure-audit audit PATH`.
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "audit")
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError("a command or a target is required (try --help)")
        return run_audit(args)
    except UsageError as exc:
        print(f"closure-audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("closure-audit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_USAGE


class _LazyProgress:
    """A progress display that appears only when a scan outlasts a moment,
    and only on a terminal."""

    DELAY = 0.4

    def __init__(self, console):
        self.console = console
        self.start = time.monotonic()
        self.progress = None
        self.task = None

    def __call__(self, files: int) -> None:
        if self.progress is None:
            if not self.console.is_terminal or time.monotonic() - self.start < self.DELAY:
                return
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.progress = Progress(SpinnerColumn(), TextColumn("scanning {task.fields[files]:,} files"),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self.task = self.progress.add_task("scan", total=None, files=0)
            self.progress.start()
        self.progress.update(self.task, files=files)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def run_audit(args) -> int:
    from .audit import Auditor, TargetError
    from .policy import PolicyError, load_policy

    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    if args.driver_dir:
        if not all(d.startswith("/") for d in args.driver_dir):
            raise UsageError("--driver-dir must be an absolute path")
        from dataclasses import replace

        policy = replace(policy, driver_dirs=tuple(args.driver_dir))

    progress = None
    err_console = None
    if sys.stderr.isatty():
        from rich.console import Console

        err_console = Console(stderr=True)
        progress = _LazyProgress(err_console)
    try:
        auditor = Auditor(args.targets, policy, root=args.root, progress=progress)
        report = auditor.run()
        chain = tree_chain(auditor, args.tree) if args.tree else None
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    finally:
        if progress is not None:
            progress.stop()

    from . import report as rp

    if args.json:
        sys.stdout.write(rp.dumps(report, chain) + "\n")
    else:
        from rich.console import Console

        rp.render(report, Console(highlight=False), chain)
    return EXIT_FINDINGS if report.failed else EXIT_OK


def tree_chain(auditor, path: str):
    """The load chain of one object, for --tree."""
    from .elf import InvalidElf, read_elf

    candidates = [path] + [os.path.join(t, path) for t in auditor.targets if os.path.isdir(t)]
    found = next((c for c in candidates if os.path.isfile(c)), None)
    if found is None:
        raise UsageError(f"--tree: file not found: {path}")
    real = os.path.realpath(found)
    try:
        elf = auditor.elf.get(real) or read_elf(real)
    except (InvalidElf, OSError) as exc:
        raise UsageError(f"--tree: cannot read {path}: {getattr(exc, 'reason', exc)}") from None
    if elf is None:
        raise UsageError(f"--tree: not an ELF file: {path}")
    return auditor.loader.chain(real, elf)


if __name__ == "__main__":
    sys.exit(main())
