"""`closure-audit why-build`: what Nix will build instead of fetching, and
the setting that caused it (docs/why-build.md)."""

from __future__ import annotations

from . import options

HELP = "what Nix will build instead of download for TARGET, and (with --like) the setting that caused it"


def add_arguments(p) -> None:
    p.description = ("closure-audit why-build: the derivations Nix will build and the paths it will fetch for "
                     "TARGET, the root causes of the rebuild and, with --like REF, how each differs from the "
                     "same derivation as the cache builds it (docs/why-build.md).")
    p.add_argument("targets", nargs="+", metavar="TARGET", help="a .drv store path or an installable")
    p.add_argument("--like", metavar="REF",
                   help="the same thing as the cache builds it (a .drv or an installable): each root cause is "
                        "compared with REF's derivation of the same name")
    p.add_argument("--store", metavar="URL", action="append",
                   help="a binary cache to consult (file://, http://, https://), repeatable; default: Nix's "
                        "configured substituters")
    options.add_cache_options(p)
    options.add_json(p)
    options.add_markdown(p)


def run(args) -> int:
    from ..closure.derivation import instantiate
    from ..closure.plan import open_substituters, why_build
    from ..output.markdown import check_markdown_option, why_build_markdown, write_summary

    check_markdown_option(args.markdown, args.json)
    workers = options.http_connections(args)
    targets = list(dict.fromkeys(instantiate(t) for t in args.targets))
    like = None if args.like is None else instantiate(args.like)
    substituters = open_substituters(args.store, args.trusted_public_keys, args.refresh, workers)
    try:
        plan, names, causes = why_build(targets, like, substituters, workers)
    finally:
        substituters.close()
    write_summary(lambda: why_build_markdown(args.targets, plan, names, causes), args.markdown)
    if args.json:
        from ..output.json_report import emit, why_build_json

        emit(why_build_json(targets, plan, names, causes))
    elif args.markdown != "-":
        from ..output.terminal import console, render_why_build

        render_why_build(console(), targets, plan, names, causes)
    return 1 if plan.build else 0
