"""findings/policy.py on its own: the Policy the judges take (what a store
name is forbidden for, a rule's severity in a mode, which files [ignore]
drops) and the [ignore] line the findings suggest. Reading a policy file is
policy/load.py's (tests/policy)."""

from __future__ import annotations

from closure_audit.findings.policy import FORBIDDEN, Policy, ignore_line
from closure_audit.loader.libraries import C_RUNTIME_FAMILY, DEFAULT_DRIVER_DIRS
from closure_audit.modes import NIX_STORE, TREE, Mode


def test_the_default_policy():
    p = Policy()
    assert (p.forbidden, p.allowed, p.ignore_paths, p.host_dirs) == (FORBIDDEN, (), (), None)
    assert (p.driver_dirs, p.host_allowed, p.gpu_capabilities, p.gpu_forward_compat) == (
        DEFAULT_DRIVER_DIRS, C_RUNTIME_FAMILY, None, False)


def test_a_store_name_is_forbidden_by_its_first_pattern_unless_allowed():
    p = Policy()
    assert p.forbids("magma-2.7.2") == ("magma-*", "magma's shared libraries (link magma statically)")
    assert p.forbids("cuda12.9-cuda_nvcc-12.9.86") == ("cuda*-cuda_nvcc-*", "the CUDA compiler")
    # cudatoolkit-*-static: the toolkit's pattern comes first in the list.
    assert p.forbids("cudatoolkit-12.4.1-static") == ("cudatoolkit-*", "the monolithic CUDA toolkit")
    assert p.forbids("libcublas-13.1.0.3-lib") is None and p.forbids("magmatic-1.0") is None
    allowing = p._replace(allowed=("magma-*",))
    assert allowing.forbids("magma-2.7.2") is None and allowing.forbids("nvcc-12.9") is not None
    # Patterns match the whole name, case-sensitively.
    assert p.forbids("MAGMA-2.7.2") is None and p.forbids("x-magma-2.7.2") is None


def test_a_rules_severity_comes_from_the_policy_else_from_the_mode():
    p = Policy()
    assert p.severity_of("missing-driver-runpath", Mode(NIX_STORE)) == "error"
    assert p.severity_of("missing-driver-runpath", Mode(TREE)) is None  # not checked in a tree
    assert p.severity_of("resolved-on-host", Mode(TREE)) == "warning"
    tuned = p._replace(severity={"resolved-on-host": "error", "runpath-stale-dir": "off"})
    assert tuned.severity_of("resolved-on-host", Mode(TREE)) == "error"
    assert tuned.severity_of("runpath-stale-dir", Mode(TREE)) is None
    assert tuned.severity_of("runpath-stale-dir", Mode(NIX_STORE)) is None
    # A severity the policy sets holds in a mode whose default does not check the rule.
    assert tuned.severity_of("resolved-on-host", Mode(NIX_STORE)) == "error"


def test_ignored_paths_match_the_path_or_it_relative_to_a_root():
    p = Policy(ignore_paths=("*/tests/*", "lib/skip*"))
    assert p.ignored("/t/site/torch/tests/libx.so")
    assert p.ignored("/t/lib/skip.so", ("/t",)) and not p.ignored("/t/lib/skip.so")
    assert not p.ignored("/t/lib/keep.so", ("/t",)) and not p.ignored("/u/lib/skip.so", ("/t",))
    assert not Policy().ignored("/t/tests/x")


def test_the_ignore_line_names_the_file_as_the_policy_would_match_it():
    assert ignore_line("/t/venv/lib/libx.so", ("/t/venv",)) == '[ignore] paths = ["lib/libx.so"]'
    assert ignore_line("/elsewhere/libx.so", ("/t/venv",)) == '[ignore] paths = ["/elsewhere/libx.so"]'
    assert ignore_line("/t/libx.so") == '[ignore] paths = ["/t/libx.so"]'
    # What the line says is ignored is.
    rel = ignore_line("/t/venv/lib/libx.so", ("/t/venv",)).split('"')[1]
    assert Policy(ignore_paths=(rel,)).ignored("/t/venv/lib/libx.so", ("/t/venv",))
