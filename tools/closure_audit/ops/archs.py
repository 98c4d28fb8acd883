"""`archs`: read every ELF file's GPU code, group it, judge it against the
requested capabilities."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..elf.fatbin import read_files
from ..elf.payloads import kernels_of
from ..elf.walk import walk_targets
from ..pipeline.found import check_found
from ..findings.collector import Findings
from ..findings.gpu import ArchReport, FileArchs, GpuJudge, Unread, group
from . import result_type

# scope: the targets.Scope commands/ resolved; request: cuda.request.Request
# or None; deep, kernels: as --deep, --kernels; roots: with --closure, the
# closure's roots, which the report names as its targets.
Options = namedtuple("Options", "scope policy request deep kernels roots", defaults=(False, False, None))

Result = result_type("archs", "report", """report: findings.gpu.ArchReport.""",
                     lambda r: r.report.failed)


def run(options: Options, progress=nullcontext) -> Result:
    """The report of `archs`. `progress`: a context manager giving a callback
    for the count of files."""
    with progress() as shown:
        report = archs(options.scope, options.policy, options.request, options.deep, shown, options.kernels)
    if options.roots is not None:
        report.targets = options.roots
    return Result(report)


def archs(scope, policy, request, deep: bool, progress=None, kernels: bool = False):
    """Read every ELF file's GPU code of a targets.Scope, group it, judge it."""
    walked = walk_targets(scope, ignore=policy.ignored if policy.ignore_paths else None, progress=progress)
    check_found(walked)  # a target without ELF files has no GPU code to judge: an error, not a pass
    paths = sorted(walked.scan.elf)
    report = ArchReport(targets=walked.targets, mode=walked.mode, deep=deep, request=request, elf_files=len(paths))
    findings = Findings(policy, walked.mode, walked.scope)
    judge = GpuJudge(request, findings)
    findings.invalid_elf(walked.scan.problems)
    for path, code in read_files(paths, deep, progress=progress).items():
        if code.entries or code.problems:
            f = FileArchs(path, code.containers, group(code.entries), code.problems)
            judged(judge, f)
            if kernels:
                for g in f.groups:
                    if not f.kernels.read(g):
                        f.kernels.add(g, kernels_of(path, g.objects))
            report.files.append(f)
    report.findings = findings.sorted()
    return report


def judged(judge: GpuJudge, f: FileArchs) -> None:
    """Judge a file, reading the kernels of each group the judgement
    compares when it asks (Unread), and judging again: the payloads read
    are those compared, in the order they are, and no others."""
    while True:
        try:
            return judge.file(f)
        except Unread as need:
            f.kernels.add(need.group, kernels_of(f.path, need.group.objects))
