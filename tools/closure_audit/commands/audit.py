"""`closure-audit audit`: read the targets, resolve every load chain, judge,
report (ops/audit.py)."""

from __future__ import annotations

import os

from .. import output
from ..errors import Exit, UsageError
from ..output.json_report import audit_json
from ..output import progress
from . import options


def add_arguments(p) -> None:
    p.description = "Resolve every needed library of every ELF file in the targets."
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a directory, a file, a wheel (.whl), a Nix store path, a result symlink or an "
                        "installable (.#attr)")
    options.add_json(p)
    options.add_policy(p)
    p.add_argument("--path-info", metavar="FILE",
                   help="read the closure of store-path targets from a saved `nix path-info --json --recursive` "
                        "dump instead of asking Nix")
    options.add_build(p)
    p.add_argument("--tree", metavar="FILE", help="show the resolved dependency tree of one object")
    p.add_argument("--root", metavar="DIR", help="the tree libraries must resolve in (tree mode; "
                   "default: each directory target, or a lone file's venv, conda env or site-packages)")
    p.add_argument("--opened", action="store_true",
                   help="list every name objects may open at run time, one line each (by default one summary "
                        "line after the findings; --json always lists them)")
    p.add_argument("--driver-dir", metavar="DIR", action="append",
                   help="driver library directory (default /run/opengl-driver/lib); repeatable")


def run(args) -> int:
    from ..ops import audit

    policy = options.load_policy(args)
    if args.driver_dir:
        if not all(d.startswith("/") for d in args.driver_dir):
            raise UsageError("--driver-dir must be an absolute path")
        policy = policy._replace(driver_dirs=tuple(args.driver_dir))
    targets = [installable(t, args.build) for t in args.targets]
    closure = store_closure(targets, args.path_info, args.build)
    report, chain = audit.run(audit.Options(targets, policy, closure, args.root, args.tree), progress.progress)
    output.show(args.json, lambda: audit_json(report, chain),
                 lambda t: t.render_audit(report, t.console(), chain, args.opened))
    return Exit.FAILED if report.failed else Exit.OK


def installable(target: str, build: bool) -> str:
    """A target as a path: an installable (.#torch) becomes its store path."""
    if os.path.lexists(target) or "#" not in target:
        return target
    from ..closure.graph import resolve_root

    return resolve_root(target, build)


def store_closure(targets: list[str], path_info: str | None, build: bool):
    """The Nix closure of the targets when they are store paths (from Nix, or
    from --path-info), else None. A closure that cannot be read fails the
    audit: its forbidden paths would go unseen."""
    from ..storepath import top_store_path
    from ..targets import is_wheel

    roots = []
    for t in targets:
        real = os.path.realpath(t)
        top = top_store_path(real) if os.path.lexists(t) and not is_wheel(real) else None
        roots.append(top)
    if not all(roots):
        if path_info is not None:
            raise UsageError("--path-info gives the closure of store paths; the targets are not in the Nix store")
        return None
    from ..closure.graph import load_closure

    return load_closure(list(dict.fromkeys(roots)), path_info, build)
