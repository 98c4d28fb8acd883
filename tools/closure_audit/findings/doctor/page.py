"""A check's line, and with a rule the finding beside it, whose severity
(after the policy) is the line's status.

Takes: the Host, the collector, a CUDA Need. Gives: Page, where each
check adds its line and, with a rule, its finding.
"""

from __future__ import annotations

from ...cuda.release import Need
from ...host.probe import Host
from ..collector import Findings
from ..rules import INFO
from .facts import OK, Check

HOST_ABSENT = ("driver-missing", "gpu-not-found")  # what a host lacks, not what a target gets wrong


class Page:
    """The page one doctor run writes: its lines, and the state they are written in."""

    def __init__(self, host: Host, findings: Findings):
        self.host = host
        self.findings = findings
        self.checks: list[Check] = []
        self.prefix = ""  # with several groups of targets, the group each line is about
        self.cuda = True  # whether CUDA programs are asked about: the host alone, or a target that uses CUDA

    def line(self, check: str, message: str, rule: str | None = None, file: str = "", fixes=(),
             evidence: list[Need] | None = None, **fields):
        """Record a check; with a rule, also a finding whose severity (after the
        policy, and at most info for a host's lack no target suffers) is the check's status."""
        status, at_most = OK, None
        if rule in HOST_ABSENT and not self.cuda:
            at_most, message = INFO, f"{message}; no target uses CUDA"
        message = self.prefix + message
        if rule is not None:
            status = self.findings.severity_of(rule, at_most) or OK
            if evidence is not None:
                fields["evidence"] = [n.to_json() for n in evidence]
            self.findings.add(rule, file or self.host.root, message, at_most=at_most,
                              fixes=[f.to_json() for f in fixes], **fields)
        self.checks.append(Check(check, status, message, fixes=list(fixes), rule=rule, evidence=evidence))
