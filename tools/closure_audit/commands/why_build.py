"""`closure-audit why-build`: what Nix will build instead of fetching, and
the setting that caused it (docs/commands/why-build.md)."""

from __future__ import annotations

from .. import output
from ..output.markdown import check_markdown_option
from ..targets import resolve_derivation
from . import options


def add_arguments(p) -> None:
    p.description = ("closure-audit why-build: the derivations Nix will build and the paths it will fetch for "
                     "TARGET, the root causes of the rebuild and, with --like REF, how each differs from the "
                     "same derivation as the cache builds it (docs/commands/why-build.md).")
    p.add_argument("targets", nargs="+", metavar="TARGET", help="a .drv store path or an installable")
    p.add_argument("--like", metavar="REF",
                   help="the same thing as the cache builds it (a .drv or an installable): each root cause is "
                        "compared with REF's derivation of the same name")
    p.add_argument("--store", metavar="URL", action="append",
                   help="a binary cache to consult (file://, http://, https://), repeatable; default: Nix's "
                        "configured substituters")
    options.add_cache_options(p, "for every cache read (--store, else Nix's substituters)")
    options.add_json(p)
    options.add_markdown(p)


def run(args) -> int:
    from ..ops import why_build

    check_markdown_option(args.markdown, args.json)
    workers = options.http_connections(args)
    targets = [resolve_derivation(t).path for t in args.targets]
    like = None if args.like is None else resolve_derivation(args.like).path
    result = why_build.run(why_build.Options(targets, like, args.store, args.trusted_public_keys, args.refresh,
                                             workers, args.targets))
    return output.show(result, json=args.json, markdown=args.markdown)
