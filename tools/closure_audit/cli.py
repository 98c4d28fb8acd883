"""Command line. Exit status: 0 no finding of severity error, 1 at least one
(for `why PATTERN`: no path matched), 2 usage or input errors (always one
line on stderr, never a traceback)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import __version__
from .errors import InputError, UsageError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
COMMANDS = ("audit", "why", "size", "diff", "gate", "archs")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        raise UsageError(message)


def _closure_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--path-info", metavar="FILE",
                   help="read the closure from a saved `nix path-info --json --recursive` dump")
    p.add_argument("--build", action="store_true", help="build installables that are not built yet")
    p.add_argument("--json", action="store_true", help="print the JSON report (docs/json.md)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="closure-audit",
                description="Audit ELF trees and Nix closures the way the dynamic loader and Nix see them.")
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

    w = sub.add_parser("why", help="why paths are in a closure: chains and byte-level evidence",
                       description="Explain why paths are in TARGET's closure. Without PATTERN, every path the "
                                   "policy forbids (exit 1 when there is one); with PATTERNs, the paths they match.")
    w.add_argument("target", metavar="TARGET", nargs="?",
                   help="store path, result symlink, installable (.#attr), or a path-info dump; "
                        "omitted with --path-info, whose top-level paths are the roots")
    w.add_argument("patterns", nargs="*", metavar="PATTERN",
                   help="store path, hash part, or pattern on store names (magma-*, cudatoolkit)")
    w.add_argument("--policy", metavar="FILE", help="TOML policy with [forbidden] (docs/policy.md)")
    w.add_argument("--all-chains", action="store_true", help="also show every referrer, with evidence")
    _closure_options(w)

    s = sub.add_parser("size", help="NAR, closure and added size of every path of a closure",
                       description="Sizes of every path of the closure, largest added size first.")
    s.add_argument("targets", nargs="*", metavar="TARGET")
    s.add_argument("--top", type=int, default=25, metavar="N", help="rows to show (default 25)")
    s.add_argument("--all", action="store_true", help="show every path")
    _closure_options(s)

    d = sub.add_parser("diff", help="compare two closures package by package",
                       description="Compare two closures: packages added, removed and changed, with sizes.")
    d.add_argument("old", metavar="OLD", help="store path, result symlink, installable or path-info dump")
    d.add_argument("new", metavar="NEW")
    d.add_argument("--policy", metavar="FILE", help="TOML policy with [forbidden] (docs/policy.md)")
    d.add_argument("--build", action="store_true", help="build installables that are not built yet")
    d.add_argument("--json", action="store_true", help="print the JSON report (docs/json.md)")

    g = sub.add_parser("gate", help="fail CI when a closure breaks its budgets",
                       description="Check closures against a budgets file (docs/gate.md). Exit 1 on any "
                                   "violation, 2 when something cannot be checked.")
    g.add_argument("--budgets", metavar="FILE", required=True, help="TOML budgets file")
    g.add_argument("--target", metavar="NAME=WHAT", action="append", default=[],
                   help="the closure of target NAME: store path, result symlink or installable")
    g.add_argument("--path-info", metavar="NAME=FILE", action="append", default=[],
                   help="read target NAME's closure from a saved path-info dump")
    g.add_argument("--baseline", metavar="NAME=WHAT", action="append", default=[],
                   help="baseline of target NAME: a saved JSON report, a path-info dump or a store path")
    g.add_argument("--max-growth", metavar="NAME=LIMIT", action="append", default=[],
                   help="how much target NAME may grow against its baseline: bytes (200MiB) or a percentage (5%%)")
    g.add_argument("--policy", metavar="FILE", help="TOML policy with [forbidden] (docs/policy.md)")
    g.add_argument("--all-chains", action="store_true", help="show every referrer of forbidden paths")
    g.add_argument("--markdown", metavar="FILE", help="write a Markdown summary ('-' for standard output); "
                   "also appended to $GITHUB_STEP_SUMMARY when that is set")
    g.add_argument("--build", action="store_true", help="build installables that are not built yet")
    g.add_argument("--json", action="store_true", help="print the JSON report (docs/json.md)")

    x = sub.add_parser("archs", help="GPU code inside fat binaries: architectures, sizes, what is missing or unused",
                       description="List the GPU code objects (cubin, PTX, LTO IR) inside every ELF file of the "
                                   "targets; with requested capabilities, report what is missing and what no "
                                   "requested GPU can use (docs/archs.md).")
    x.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a file, a directory, a Nix store path or result symlink; with --closure, also an "
                        "installable (.#attr)")
    x.add_argument("--capabilities", metavar="LIST", help="requested CUDA capabilities: 8.6,9.0 (9.0a, 10.0f)")
    x.add_argument("--forward-compat", action=argparse.BooleanOptionalAction, default=None,
                   help="also require PTX for GPUs newer than those requested (default: off for --capabilities, "
                        "the source's setting otherwise)")
    x.add_argument("--from-nix-config", nargs="?", const="", metavar="FILE",
                   help="read cudaCapabilities and cudaForwardCompat from a nixpkgs config "
                        "(default: the one nixpkgs reads: $NIXPKGS_CONFIG, ~/.config/nixpkgs/config.nix)")
    x.add_argument("--policy", metavar="FILE", help="TOML policy; [gpu] can hold the capabilities (docs/policy.md)")
    x.add_argument("--deep", action="store_true",
                   help="also search the rest of every file for containers (NVIDIA keeps some in .ldata, "
                        ".rodata, .cask_resource); reads whole files")
    x.add_argument("--closure", action="store_true", help="scan every path of the targets' Nix closures")
    x.add_argument("--build", action="store_true", help="with --closure: build installables that are not built yet")
    x.add_argument("--json", action="store_true", help="print the JSON report (docs/json.md)")
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
        return RUNNERS[args.command](args)
    except InputError as exc:
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


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _emit_json(data: dict) -> None:
    from .output.json_report import dumps

    sys.stdout.write(dumps(data) + "\n")


# -- audit -----------------------------------------------------------------------

def run_audit(args) -> int:
    from dataclasses import replace

    from .audit import Auditor
    from .findings.policy import load_policy

    policy = load_policy(args.policy)
    if args.driver_dir:
        if not all(d.startswith("/") for d in args.driver_dir):
            raise UsageError("--driver-dir must be an absolute path")
        policy = replace(policy, driver_dirs=tuple(args.driver_dir))

    progress = None
    if sys.stderr.isatty():
        from rich.console import Console

        progress = _LazyProgress(Console(stderr=True))
    try:
        auditor = Auditor(args.targets, policy, root=args.root, progress=progress)
        report = auditor.run()
        chain = tree_chain(auditor, args.tree) if args.tree else None
    finally:
        if progress is not None:
            progress.stop()

    if args.json:
        from .output.json_report import audit_json

        _emit_json(audit_json(report, chain))
    else:
        from .output.terminal import render_audit

        render_audit(report, _console(), chain)
    return EXIT_FINDINGS if report.failed else EXIT_OK


def tree_chain(auditor, path: str):
    """The load chain of one object, for --tree."""
    from .elf.reader import InvalidElf, read_elf

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


# -- closures --------------------------------------------------------------------

def _closure(target: str | list[str] | None, path_info: str | None, build: bool):
    from .closure.graph import is_dump_file, load_closure, load_dump

    targets = [] if target is None else [target] if isinstance(target, str) else list(target)
    if path_info is None and len(targets) == 1 and is_dump_file(targets[0]):
        return load_dump(targets[0], [])
    if path_info is None and not targets:
        raise UsageError("a TARGET or --path-info FILE is required")
    return load_closure(targets, path_info, build)


def run_why(args) -> int:
    from .closure.evidence import Scanner
    from .findings.policy import load_policy
    from .closure.sizes import added_sizes
    from .storepath import name_part
    from .closure.why import explain, forbidden_finding, forbidden_matches, matcher

    policy = load_policy(args.policy)
    target, patterns = args.target, args.patterns
    if args.path_info is not None and target is not None:
        # The dump names its roots: every word is a pattern.
        target, patterns = None, [target, *patterns]
    closure = _closure(target, args.path_info, args.build)
    added = added_sizes(closure)
    query = bool(patterns)
    if query:
        tests = [(p, matcher(p, closure)) for p in patterns]
        matches = {}
        for path in closure.graph:
            for pattern, test in tests:
                if test(path):
                    hit = policy.forbids(name_part(path))
                    matches[path] = (pattern, hit[1] if hit else None)
                    break
    else:
        matches = forbidden_matches(closure, policy)
    scanner = Scanner(closure.store_dir)
    explanations = explain(closure, matches, args.all_chains, scanner)
    findings = []
    severity = policy.severity_of("forbidden-path", "nix-store")
    if not query and severity is not None:
        findings = [forbidden_finding(e, added.get(e.path, 0), severity) for e in explanations]
    if args.json:
        from .output.json_report import why_json

        _emit_json(why_json(closure, explanations, findings, added, scanner.bytes_scanned))
    else:
        from .output.terminal import render_why

        render_why(_console(), closure, explanations, findings, added, query)
    if query:
        return EXIT_OK if explanations else EXIT_FINDINGS
    return EXIT_FINDINGS if any(f.severity == "error" for f in findings) else EXIT_OK


def run_size(args) -> int:
    from .closure.sizes import roots_closure_size, table

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    targets = args.targets[0] if len(args.targets) == 1 else args.targets
    closure = _closure(targets or None, args.path_info, args.build)
    rows = table(closure)
    total = roots_closure_size(closure)
    top = None if args.all else args.top
    if args.json:
        from .output.json_report import size_json

        _emit_json(size_json(closure, rows, total, top))
    else:
        from .output.terminal import render_size

        render_size(_console(), closure, rows, total, top)
    return EXIT_OK


def run_diff(args) -> int:
    from .closure.diff import diff
    from .closure.evidence import Scanner
    from .findings.policy import load_policy
    from .closure.sizes import added_sizes, roots_closure_size
    from .closure.why import explain, forbidden_finding, forbidden_matches

    policy = load_policy(args.policy)
    old = _closure(args.old, None, args.build)
    new = _closure(args.new, None, args.build)
    packages = diff(old, new)
    before = forbidden_matches(old, policy)
    fresh = {p: m for p, m in forbidden_matches(new, policy).items() if p not in before}
    findings = []
    severity = policy.severity_of("forbidden-path", "nix-store")
    if fresh and severity is not None:
        added = added_sizes(new)
        findings = [forbidden_finding(e, added.get(e.path, 0), severity)
                    for e in explain(new, fresh, False, Scanner(new.store_dir))]
    old_size, new_size = roots_closure_size(old), roots_closure_size(new)
    if args.json:
        from .output.json_report import diff_json

        _emit_json(diff_json(old, new, packages, findings, old_size, new_size))
    else:
        from .output.terminal import render_diff

        render_diff(_console(), old, new, packages, findings, old_size, new_size)
    return EXIT_FINDINGS if any(f.severity == "error" for f in findings) else EXIT_OK


def run_gate(args) -> int:
    from .closure.gate import apply_overrides, load_budgets, run_gate as check
    from .output.markdown import gate_markdown
    from .findings.policy import load_policy

    policy = load_policy(args.policy)
    budgets = load_budgets(args.budgets)
    apply_overrides(budgets, args.target, args.path_info, args.baseline, args.max_growth)
    results, findings = check(budgets, policy, args.build, args.all_chains)
    summary_files = [f for f in (args.markdown, os.environ.get("GITHUB_STEP_SUMMARY")) if f]
    if summary_files:
        text = gate_markdown(results, findings)
        for f in summary_files:
            if f == "-":
                sys.stdout.write(text)
                continue
            try:
                with open(f, "a" if f == os.environ.get("GITHUB_STEP_SUMMARY") else "w", encoding="utf-8") as out:
                    out.write(text)
            except OSError as exc:
                raise UsageError(f"cannot write the Markdown summary to {f}: {exc.strerror}") from None
    if args.json:
        from .output.json_report import gate_json

        _emit_json(gate_json(results, findings))
    elif args.markdown != "-":
        from .output.terminal import render_gate

        render_gate(_console(), results, findings)
    return EXIT_FINDINGS if any(f.severity == "error" for f in findings) else EXIT_OK


def gpu_request(args, policy):
    """The requested capabilities: --capabilities, else --from-nix-config, else
    the policy's [gpu] table, else none."""
    from .gpu.request import from_nix_config, make_request

    if args.capabilities is not None and args.from_nix_config is not None:
        raise UsageError("give --capabilities or --from-nix-config, not both")
    if args.capabilities is not None:
        request = make_request(args.capabilities.split(","), bool(args.forward_compat), "--capabilities")
    elif args.from_nix_config is not None:
        request = from_nix_config(args.from_nix_config or None)
    elif policy.gpu_capabilities is not None:
        request = make_request(list(policy.gpu_capabilities), policy.gpu_forward_compat,
                               f"policy {args.policy}")
    elif args.forward_compat is not None:
        raise UsageError("--forward-compat needs capabilities (--capabilities, --from-nix-config or a policy)")
    else:
        return None
    if args.forward_compat is not None and request.forward_compat != args.forward_compat:
        from dataclasses import replace

        request = replace(request, forward_compat=args.forward_compat)
    return request


def run_archs(args) -> int:
    from .archs import run
    from .findings.policy import load_policy

    policy = load_policy(args.policy)
    request = gpu_request(args, policy)
    targets, roots = args.targets, None
    if args.closure:
        closure = _closure(args.targets, None, args.build)
        targets, roots = [p for p in closure.paths if closure.on_disk(p)], closure.roots
    elif args.build:
        raise UsageError("--build needs --closure")
    progress = None
    if sys.stderr.isatty():
        from rich.console import Console

        progress = _LazyProgress(Console(stderr=True))
    try:
        report = run(targets, policy, request, args.deep, progress)
    finally:
        if progress is not None:
            progress.stop()
    if roots is not None:
        report.targets = roots
    if args.json:
        from .output.json_report import archs_json

        _emit_json(archs_json(report))
    else:
        from .output.terminal import render_archs

        render_archs(_console(), report)
    return EXIT_FINDINGS if report.failed else EXIT_OK


RUNNERS = {"audit": run_audit, "why": run_why, "size": run_size, "diff": run_diff, "gate": run_gate,
           "archs": run_archs}


if __name__ == "__main__":
    sys.exit(main())
