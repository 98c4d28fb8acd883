"""policy/load.py: the policy file read and checked into a Policy. Every
key is checked, and a mistake is one line naming the file and the key."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from closure_audit.errors import PolicyError
from closure_audit.findings.policy import FORBIDDEN, Policy
from closure_audit.loader.libraries import C_RUNTIME_FAMILY
from closure_audit.policy.load import load_policy, parse_policy


def documented_example() -> str:
    """The example of docs/reference/policy.md, as a user copies it."""
    text = (ROOT / "docs/reference/policy.md").read_text()
    return re.search(r"```toml\n(.*?)```", text, re.S)[1]


def test_no_file_is_the_default_policy():
    assert load_policy(None) == Policy()


def test_the_documented_example_reads_as_it_says(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(documented_example())
    p = load_policy(str(path))
    assert p.severity == {"resolved-on-host": "error", "runpath-missing-dir": "off"}
    assert p.driver_dirs == ("/run/opengl-driver/lib",)
    assert p.driver_libraries == ("libcuda.so*", "libnvidia-*.so*")
    assert p.host_allowed == C_RUNTIME_FAMILY + ("libgomp.so.1",)  # added to, not replaced
    assert p.host_dirs == ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu")
    assert (p.lib_token, p.platform_token) == ("lib/x86_64-linux-gnu", "haswell")
    assert p.ignore_paths == ("*/tests/*", "lib/python3.11/site-packages/triton/*")
    assert p.forbidden == FORBIDDEN + (("openmpi-*", "forbidden by the policy"),) and p.allowed == ("magma-*",)
    assert (p.gpu_capabilities, p.gpu_forward_compat) == (("8.6", "9.0"), True)
    # What it tunes, the judges then take.
    assert p.forbids("magma-2.7.2") is None and p.forbids("openmpi-5.0") == ("openmpi-*", "forbidden by the policy")


def test_the_built_in_forbidden_list_can_be_dropped():
    p = parse_policy({"forbidden": {"defaults": False, "patterns": ["openmpi-*"]}})
    assert p.forbidden == (("openmpi-*", "forbidden by the policy"),)
    assert p.forbids("magma-2.7.2") is None


@pytest.mark.parametrize("data, message", [
    ({"schema": "closure-audit-policy/2"}, "unsupported schema 'closure-audit-policy/2'"),
    ({"severity": "error"}, "'severity' must be a table"),
    ({"severity": {"no-such-rule": "error"}}, "unknown rule 'no-such-rule' in [severity]"),
    ({"severity": {"invalid-elf": "fatal"}}, "severity of 'invalid-elf' must be one of error, warning, info, off"),
    ({"drivers": {}}, "unknown table [drivers]"),
    ({"driver": {"directory": ["/x"]}}, "unknown key 'driver.directory'"),
    ({"driver": {"directories": ["relative/lib"]}}, "'driver.directories' must hold absolute paths"),
    ({"ignore": {"paths": "x"}}, "'ignore.paths' must be a list of strings"),
    ({"loader": {"lib": 3}}, "'loader.lib' must be a string"),
    ({"gpu": {"forward-compat": "yes"}}, "'gpu.forward-compat' must be true or false"),
    ({"forbidden": {"defaults": 1}}, "'forbidden.defaults' must be true or false"),
    ({"forbidden": {"deny": []}}, "unknown key 'forbidden.deny'"),
])
def test_a_mistake_is_one_line_naming_the_source_and_key(data, message):
    with pytest.raises(PolicyError) as caught:
        parse_policy(data, "my.toml")
    assert str(caught.value).startswith("my.toml: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text, message", [
    (None, "policy file not found"),
    ("[severity\n", "is not valid TOML"),
    (b"\xff\xfe", "not UTF-8 text"),
])
def test_a_file_that_cannot_be_read_as_toml_is_one_line(tmp_path, text, message):
    path = tmp_path / "policy.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(PolicyError) as caught:
        load_policy(str(path))
    assert message in str(caught.value) and str(path) in str(caught.value)
