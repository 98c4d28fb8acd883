"""One collector for the findings of a run: every judge adds here.

The policy decides each finding's severity (or drops it when its rule is off
or not checked in the run's mode) and which files are ignored; the same
finding reached twice (two load chains through one library) is kept once:
findings are the same when their rule, file and scalar fields are.

Takes: a Policy (findings/policy.py), the run's Mode and the roots
[ignore] paths are relative to. Gives: Findings, which every judge adds to,
sorted for output/.
"""

from __future__ import annotations

from ..modes import Mode
from .policy import Policy
from .rules import SEVERITY_RANK, Finding


class Findings:
    def __init__(self, policy: Policy, mode: str, ignore_roots: tuple[str, ...] | None = None):
        """`ignore_roots`: the roots that [ignore] paths are relative to, for
        judges of files; None for judges of closures, whose findings name store
        paths rather than files of a tree."""
        self.policy = policy
        self.mode = Mode(mode)
        self.ignore_roots = ignore_roots
        self._items: list[Finding] = []
        self._seen: set[tuple] = set()

    def add(self, rule: str, file: str, message: str, at_most: str | None = None, **fields) -> None:
        """`at_most`: the severity the finding gets at most, whatever the
        policy says (a host's fault that no target suffers from)."""
        severity = self.severity_of(rule, at_most)
        if severity is None:
            return
        if self.ignored(file):
            return
        key = (rule, file, tuple(sorted((k, v) for k, v in fields.items() if not isinstance(v, (list, dict)))))
        if key in self._seen:
            return
        self._seen.add(key)
        self._items.append(Finding(rule, severity, message, file, fields))

    def severity_of(self, rule: str, at_most: str | None = None) -> str | None:
        severity = self.policy.severity_of(rule, self.mode)
        if severity is not None and at_most is not None and SEVERITY_RANK[severity] < SEVERITY_RANK[at_most]:
            return at_most
        return severity

    def invalid_elf(self, problems) -> None:
        """A file that cannot be read as ELF, or at all: (path, reason) pairs."""
        for path, reason in problems:
            self.add("invalid-elf", path, reason, reason=reason)

    def ignored(self, file: str) -> bool:
        """The policy's [ignore] paths drop `file`'s findings."""
        return self.ignore_roots is not None and self.policy.ignored(file, self.ignore_roots)

    def sorted(self) -> list[Finding]:
        return sorted(self._items, key=Finding.sort_key)
