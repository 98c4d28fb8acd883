"""`closure-audit audit`: read the targets, resolve every load chain, judge,
report (ops/audit.py)."""

from __future__ import annotations

from .. import output
from ..errors import UsageError
from ..output import progress
from ..targets import resolve_target, scope_of
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
    p.add_argument("--symbols", action="store_true",
                   help="also check that every undefined symbol of objects bound at load time (Python extension "
                        "modules and their libraries, objects linked with -z now) is defined in their load scope")
    options.add_import_order(p)
    p.add_argument("--driver-dir", metavar="DIR", action="append",
                   help="driver library directory (default /run/opengl-driver/lib); repeatable")


def run(args) -> int:
    from ..ops import audit

    policy = options.load_policy(args)
    if args.driver_dir:
        if not all(d.startswith("/") for d in args.driver_dir):
            raise UsageError("--driver-dir must be an absolute path")
        policy = policy._replace(driver_dirs=tuple(args.driver_dir))
    scope = scope_of([resolve_target(t, args.build) for t in args.targets], root=args.root)
    result = audit.run(audit.Options(scope, policy, args.path_info, args.tree, args.opened, args.symbols,
                                     args.import_order), progress.progress)
    return output.show(result, json=args.json)

