"""Real parts the suite needs (Nix, nvcc, patchelf, cross binutils, ...).

Where a part is missing a test skips on a developer's machine, but under
CI=true it fails: ci/setup installs every part, so a missing one there is a
broken setup, never a reason to pass. Opt-in data (the real CUDA wheels) is
not a part: those tests skip until their variable is set.
"""

from __future__ import annotations

import os

import pytest

CI = os.environ.get("CI", "").lower() == "true"


def needs(part: str, present: bool, nix: bool = False):
    """A marker for tests that need `part`: a no-op where it is present, a skip
    where it is not, and a failure where it is not under CI=true (conftest.py
    decides). With `nix`, the part is Nix: the test is also marked `nix`, the
    tests ci/test runs again on a current Nix (ci/test-current-nix)."""
    mark = pytest.mark.needs_part if present else pytest.mark.missing_part
    return mark(part, nix=nix)


def require(part: str, present: bool) -> None:
    """The same, inside a test body."""
    if present:
        return
    if CI:
        pytest.fail(f"CI=true but {part} is missing (ci/setup installs it)", pytrace=False)
    pytest.skip(f"needs {part}")
