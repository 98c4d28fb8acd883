"""`closure-audit survey`: every job of an evaluation judged as `gate` judges
a closure, and compared with an earlier survey."""

from __future__ import annotations

import sys

from .. import output
from ..errors import BudgetError, ClosureError, UsageError
from ..output.markdown import check_markdown_option
from . import options


def add_arguments(p) -> None:
    p.description = ("Judge every job of an evaluation: closure size and paths, forbidden paths with their "
                     "chains, GPU code, and regressions against an earlier survey (docs/commands/survey.md). "
                     "Exit 1 on findings or regressions, else 2 when a job could not be judged, else 0.")
    p.add_argument("evaluation", metavar="EVAL",
                   help="nix-eval-jobs' JSON lines, or `nix eval --json` of an attribute set of store paths; "
                        "'-' reads standard input")
    options.add_policy(p, "TOML policy with [forbidden] (docs/reference/policy.md)")
    p.add_argument("--budgets", metavar="FILE",
                   help="a budgets file (docs/commands/gate.md): [defaults] for every job, [targets.ATTR] "
                        "for the job ATTR")
    p.add_argument("--baseline", metavar="EARLIER.json", help="an earlier survey's --json report to compare with")
    p.add_argument("--max-growth", metavar="LIMIT", action="append", default=[],
                   help="with --baseline: growth that is a regression, bytes (200MiB) or a percentage (5%%); "
                        "given more than once, growth must pass every limit (default: 5%% and 50MiB)")
    p.add_argument("--archs", action="store_true",
                   help="also read the GPU code of each job's own outputs (from the NARs with --store)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither use nor keep results by store path ($XDG_CACHE_HOME/closure-audit)")
    options.add_markdown(p)
    p.add_argument("--html", metavar="FILE", help="write the survey as one HTML page")
    options.add_json(p)
    p.add_argument("--store", metavar="URL",
                   help="read the closures from a Nix binary cache (file:///DIR, http://HOST[:PORT][/PREFIX], "
                        "https://...) instead of the local store (docs/commands/store.md)")
    options.add_cache_options(p)


def run(args) -> int:
    from ..gate.baseline import DEFAULT_GROWTH, read_baseline
    from ..gate.budgets import parse_growth
    from ..gate.evaluation import read_evaluation
    from ..ops import survey

    check_markdown_option(args.markdown, args.json)
    if args.html is not None:
        from ..output import html

        html.check_writable(args.html)
    if args.max_growth and args.baseline is None:
        raise UsageError("--max-growth needs --baseline")
    policy = options.load_policy(args)
    budgets = _budgets(args.budgets)
    growth = tuple(parse_growth(v, "--max-growth") for v in args.max_growth) or DEFAULT_GROWTH
    baseline = read_baseline(args.baseline) if args.baseline is not None else None
    jobs = read_evaluation(_read_input(args.evaluation), args.evaluation)
    cache = options.open_cache(args)
    try:
        result = survey.run(survey.Options(jobs, args.evaluation, policy, budgets, cache, args.archs, baseline,
                                           growth, not args.no_cache, page=args.html))
    finally:
        if cache is not None:
            cache.close()
    return output.show(result, json=args.json, markdown=args.markdown)


def _read_input(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        with open(name, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ClosureError(f"cannot read the evaluation {name}: {exc.strerror}") from None


def _budgets(file: str | None) -> dict:
    """Budgets by job attribute; the [defaults] under gate.survey.DEFAULTS."""
    if file is None:
        return {}
    from ..gate.budgets import parse_budgets
    from ..gate.survey import DEFAULTS
    from ..util import read_toml

    data = read_toml(file, "budgets", BudgetError)
    targets = data.get("targets", {})
    if not isinstance(targets, dict):
        raise BudgetError(f"{file}: targets must be a table of tables")
    # The defaults become a target of their own, which every job without its own table gets.
    return {b.name: b for b in parse_budgets({**data, "targets": {**targets, DEFAULTS: {}}}, file)}
