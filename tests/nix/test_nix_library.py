"""The Nix library (lib/) through nix-instantiate: golden flags, every error
message, the defaults of each CUDA release, the unfree predicate."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT
from contract_eval import needs_nix_instantiate

GOLDEN = json.loads((ROOT / "tests/golden/cuda-flags.json").read_text())
pytestmark = needs_nix_instantiate


def nix_eval(expr: str) -> subprocess.CompletedProcess:
    # NIX_PATH is emptied: the library must not need <nixpkgs> or anything else.
    env = {k: v for k, v in os.environ.items() if k != "NIX_PATH"}
    return subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def flags_expr(args: dict) -> str:
    return f"(import ./lib).cuda.flags (builtins.fromJSON ''{json.dumps(args)}'')"


def test_every_golden_case_in_one_evaluation():
    exprs = " ".join(f"({flags_expr(c['args'])})" for c in GOLDEN["flags"])
    p = nix_eval(f"[ {exprs} ]")
    assert p.returncode == 0, p.stderr
    for case, got in zip(GOLDEN["flags"], json.loads(p.stdout)):
        assert got == case["expected"], case["name"]


@pytest.mark.parametrize("case", GOLDEN["errors"], ids=lambda c: c["name"])
def test_error_messages(case):
    p = nix_eval(flags_expr(case["args"]))
    assert p.returncode != 0
    assert "nixcuda: invalid CUDA options:" in p.stderr
    printed = [line.strip()[2:] for line in p.stderr.splitlines() if line.strip().startswith("- ")]
    assert printed == case["messages"]  # every problem, once, in one message


@pytest.mark.parametrize("version", sorted(GOLDEN["defaults"]))
def test_defaults_of_each_cuda_release(version):
    p = nix_eval(f'(import ./lib).cuda.defaultCapabilities "{version}"')
    assert json.loads(p.stdout) == GOLDEN["defaults"][version]
    defaults = GOLDEN["defaults"][version]
    assert not any(c.endswith(("a", "f")) for c in defaults)
    assert not {"5.3", "6.2", "7.2", "8.7", "10.1", "11.0"} & set(defaults)  # no Jetson parts


def test_cuda_13_dropped_everything_below_7_5():
    p = nix_eval('(import ./lib).cuda.supportedCapabilities "13.0"')
    caps = json.loads(p.stdout)
    assert caps[0] == "7.5" and "10.1" not in caps and "11.0" in caps
    p = nix_eval('(import ./lib).cuda.supportedCapabilities "12.9"')
    caps = json.loads(p.stdout)
    assert caps[0] == "5.0" and "10.1" in caps and "11.0" not in caps


def test_capability_table_covers_what_the_project_needs():
    table = json.loads((ROOT / "lib/data/cuda-capabilities.json").read_text())["capabilities"]
    for cap in ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"):
        assert cap in table
    assert {c for c, e in table.items() if e["jetson"]} == {"5.3", "6.2", "7.2", "8.7", "10.1", "11.0"}
    for cap, e in table.items():
        assert set(e) >= {"arch", "first", "last", "jetson", "variants"}, cap
        if e["variants"]:
            assert "family" in e, cap


def test_the_nix_side_golden_runner_agrees():
    """tests/nix/lib-golden.nix (the flake's check) passes, and fails on a broken lib."""
    assert json.loads(nix_eval("import ./tests/nix/lib-golden.nix { }").stdout) == []
    broken = "{ cuda = (import ./lib).cuda // { flags = args: { }; }; }"
    failures = json.loads(nix_eval(f"import ./tests/nix/lib-golden.nix {{ lib = {broken}; }}").stdout)
    assert failures == [f"flags: {c['name']}" for c in GOLDEN["flags"]] + [
        f"errors: {c['name']}" for c in GOLDEN["errors"]]


def test_unfree_predicate_admits_only_nvidia_cuda_licenses():
    expr = """
      let
        cuda = (import ./lib).cuda;
        pkg = license: { meta = { inherit license; }; };
        unfree = { shortName = "Unfree"; free = false; };
        mit = { shortName = "MIT"; free = true; };
      in map cuda.allowUnfreePredicate [
        (pkg cuda.licenses.cuda) (pkg [ cuda.licenses.cudnn mit ]) (pkg unfree) (pkg [ cuda.licenses.cuda unfree ])
        (pkg { shortName = "TensorRT EULA"; free = false; }) { meta = { }; }
      ]
    """
    assert json.loads(nix_eval(expr).stdout) == [True, True, False, False, True, True]


def test_the_cuda_library_table_is_the_one_python_reads():
    from closure_audit.cuda.libraries import LIBRARIES

    rows = json.loads(nix_eval("(import ./lib).cuda.libraries").stdout)
    assert rows == [lib._asdict() for lib in LIBRARIES]
    redist = json.loads(nix_eval("(import ./lib).cuda.redistOf").stdout)
    assert redist == {lib.family: lib.redist for lib in LIBRARIES}
