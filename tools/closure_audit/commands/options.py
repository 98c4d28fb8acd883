"""Arguments that several commands take, and what they resolve to."""

from __future__ import annotations

import argparse


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the JSON report (docs/json.md)")


def add_policy(p: argparse.ArgumentParser, what: str = "TOML policy (docs/policy.md)") -> None:
    p.add_argument("--policy", metavar="FILE", help=what)


def add_build(p: argparse.ArgumentParser, help: str = "build installables that are not built yet") -> None:
    p.add_argument("--build", action="store_true", help=help)


def add_markdown(p: argparse.ArgumentParser) -> None:
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown summary ('-' for standard output); "
                   "also appended to $GITHUB_STEP_SUMMARY when that is set")


def add_path_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("--path-info", metavar="FILE",
                   help="read the closure from a saved `nix path-info --json --recursive` dump")


def add_closure_inputs(p: argparse.ArgumentParser) -> None:
    """--path-info, --build and --json: how the closure commands read a closure."""
    add_path_info(p)
    add_build(p)
    add_json(p)


def read_closure(target: str | list[str] | None, path_info: str | None, build: bool):
    """The closure a command was given: a saved dump named as the one target,
    a dump given with --path-info (the targets then pick its roots), or store
    paths, result links and installables."""
    from ..closure.graph import is_dump_file, load_closure, load_dump
    from ..errors import UsageError

    targets = [] if target is None else [target] if isinstance(target, str) else list(target)
    if path_info is None and len(targets) == 1 and is_dump_file(targets[0]):
        return load_dump(targets[0], [])
    if path_info is None and not targets:
        raise UsageError("a TARGET or --path-info FILE is required")
    return load_closure(targets, path_info, build)


def load_policy(args):
    from ..findings.policy import load_policy

    return load_policy(args.policy)
