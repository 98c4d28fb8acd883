"""Which output a file of a redistributable belongs to.

The rules are data, lib/data/redist-split-rules.txt, which
hooks/split-redist-outputs.sh reads too when it moves the files at build
time; tests check that the two agree on real archives. Paths are relative to
the package root: a tarball's top directory or a wheel's
`nvidia/<component>/` prefix removed.
"""

from __future__ import annotations

import functools
from fnmatch import fnmatchcase

from closure_audit.cuda.data import text

# The order output lists are written in (pkgs/cuda/outputs).
OUTPUTS = ("bin", "lib", "static", "dev", "stubs", "doc", "samples")

RULES_FILE = "redist-split-rules.txt"
TESTS = ("dir", "top", "path", "name", "kind")


@functools.cache
def rules() -> tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...]:
    """The rules in order: (output, ((test, patterns), ...)), the file's
    comments and blank lines left out."""
    out = []
    for line in text(RULES_FILE).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        output, *tests = line.split()
        parsed = tuple((t, tuple(patterns.split(","))) for t, _, patterns in (test.partition("=") for test in tests))
        if not parsed or any(t not in TESTS for t, _ in parsed):
            raise ValueError(f"{RULES_FILE}: a rule without a test, or with one that is none of "
                             f"{', '.join(TESTS)}: {line}")
        out.append((output, parsed))
    return tuple(out)


def output_of(path: str, kind: str, executable: bool) -> str | None:
    """The output `path` goes to, or None when it stays in `out`. `kind` is
    "file", "link" or "dir"; directories themselves go nowhere."""
    if kind == "dir":
        return None
    parts = path.split("/")
    subjects = {"dir": parts[:-1], "top": [parts[0]], "path": [path], "name": [parts[-1]],
                "kind": ["executable" if kind == "file" and executable else kind]}
    for output, tests in rules():
        if all(any(fnmatchcase(s, p) for s in subjects[test] for p in patterns) for test, patterns in tests):
            return output
    return None
