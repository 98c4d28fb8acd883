"""`closure-audit audit`: read the targets, resolve every load chain, judge,
report."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import UsageError
from . import options

HELP = "resolve every needed library of every ELF file in the targets"


def add_arguments(p) -> None:
    p.description = "Resolve every needed library of every ELF file in the targets."
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a directory, a file, a Nix store path or a result symlink")
    options.add_json(p)
    options.add_policy(p)
    p.add_argument("--tree", metavar="FILE", help="show the resolved dependency tree of one object")
    p.add_argument("--root", metavar="DIR", help="the tree libraries must resolve in (tree mode; "
                   "default: each directory target, or a lone file's venv or conda env)")
    p.add_argument("--driver-dir", metavar="DIR", action="append",
                   help="driver library directory (default /run/opengl-driver/lib); repeatable")


@dataclass
class Report:
    targets: list[str]
    mode: str
    env: object  # loader.model.Environment
    files: int = 0
    elf_files: int = 0
    entry_points: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)
    skipped_links: int = 0

    @property
    def failed(self) -> bool:
        return any(f.severity == "error" for f in self.findings)


def environment(mode: str, roots: tuple[str, ...], policy):
    """What the loader model assumes of the machine, from the policy."""
    from ..loader import model as ld
    from ..storepath import store_dir

    host_dirs = ()
    if mode == "tree":
        host_dirs = policy.host_dirs if policy.host_dirs is not None else ld.default_host_dirs()
    return ld.Environment(
        mode=mode, store_dir=store_dir(), tree_roots=roots, host_dirs=host_dirs,
        driver_dirs=policy.driver_dirs, driver_libraries=policy.driver_libraries,
        host_allowed=policy.host_allowed, lib_token=policy.lib_token,
        platform_token=policy.platform_token,
    )


def audit(targets: list[str], policy, root: str | None = None,
          progress: Callable[[int], None] | None = None):
    """Read, resolve, judge: (the report, the loader that resolved it)."""
    from ..elf.walk import walk_targets
    from ..findings.collector import Findings
    from ..findings.loading import judge_loading
    from ..loader.chains import resolve
    from ..loader.model import Loader

    walked = walk_targets(targets, root=root, ignore=policy.ignored if policy.ignore_paths else None,
                          progress=progress)
    env = environment(walked.mode, walked.roots, policy)
    findings = Findings(policy, walked.mode, walked.scope)
    for path, reason in walked.scan.problems:
        findings.add("invalid-elf", path, reason, reason=reason)
    loader = Loader(env, known=walked.scan.elf)
    resolved = resolve(loader, walked.scan.elf)
    judge_loading(loader, resolved, findings)
    report = Report(walked.targets, walked.mode, env, walked.scan.files, len(walked.scan.elf),
                    resolved.entry_points, findings.sorted(), walked.scan.skipped_links)
    return report, loader


def run(args) -> int:
    from dataclasses import replace

    from ..output.progress import progress

    policy = options.load_policy(args)
    if args.driver_dir:
        if not all(d.startswith("/") for d in args.driver_dir):
            raise UsageError("--driver-dir must be an absolute path")
        policy = replace(policy, driver_dirs=tuple(args.driver_dir))
    with progress() as shown:
        report, loader = audit(args.targets, policy, root=args.root, progress=shown)
        chain = tree_chain(report, loader, args.tree) if args.tree else None
    if args.json:
        from ..output.json_report import audit_json, emit

        emit(audit_json(report, chain))
    else:
        from ..output.terminal import console, render_audit

        render_audit(report, console(), chain)
    return 1 if report.failed else 0


def tree_chain(report: Report, loader, path: str):
    """The load chain of one object, for --tree."""
    from ..elf.reader import InvalidElf, read_elf

    candidates = [path] + [os.path.join(t, path) for t in report.targets if os.path.isdir(t)]
    found = next((c for c in candidates if os.path.isfile(c)), None)
    if found is None:
        raise UsageError(f"--tree: file not found: {path}")
    real = os.path.realpath(found)
    try:
        elf = read_elf(real)
    except (InvalidElf, OSError) as exc:
        raise UsageError(f"--tree: cannot read {path}: {getattr(exc, 'reason', exc)}") from None
    if elf is None:
        raise UsageError(f"--tree: not an ELF file: {path}")
    return loader.chain(real, elf)
