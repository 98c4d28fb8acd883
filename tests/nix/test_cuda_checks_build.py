"""cudaClosureChecks (pkgs/closure-audit/cuda-checks.nix) built by real Nix,
over a small package set of plain derivations: a redistributable whose
outputs reference one another as the split hook makes them (out propagates
dev, dev names the static archive), one whose lib drags its static archive,
a package that links the first and one that does not; each output judged
by its own policy, and the index job read as Hydra reads it."""

from __future__ import annotations

import json
from pathlib import Path

import hydra
from checkbuild import build
from conftest import ROOT
from nixstore import needs_nix

pytestmark = needs_nix

SET = f"""
let
  redist = name: outputs: script: shOutputs "cuda12.9-${{name}}-1" outputs script // {{ redistName = name; }};
  libfake = redist "libfake" [ "out" "lib" "dev" "static" ] ''
    mkdir -p $out/nix-support $lib/lib $dev/include $static/lib
    echo archive > $static/lib/libfake.a
    echo "$static/lib/libfake.a $lib/lib" > $dev/include/fake.cmake
    echo library > $lib/lib/libfake.so
    echo "$dev" > $out/nix-support/propagated-build-inputs
  '';
  libleak = redist "libleak" [ "out" "lib" "static" ] ''
    mkdir -p $out $lib/lib $static/lib
    echo archive > $static/lib/libleak.a
    echo "$static/lib/libleak.a" > $lib/lib/libleak.so
  '';
  pkgs = {{
    lib = import {ROOT}/tests/contract/nixpkgs-contract-stub/lib.nix;
    config = {{ }};
    stdenv.hostPlatform.system = system;
    inherit runCommand closureAuditCheck;
    cudaPackages_12_9 = {{ inherit libfake libleak; }};
    uses-fake = builtins.derivation {{
      name = "uses-fake-1"; inherit system; builder = "/bin/sh"; buildInputs = [ libfake.lib ]; PATH = "/usr/bin:/bin";
      args = [ "-ec" "mkdir -p $out; echo $buildInputs > $out/needs" ];
    }};
    plain = sh "plain-1" "mkdir -p $out";
  }};
in
import {ROOT}/pkgs/closure-audit/cuda-checks.nix {{ inherit pkgs; }}
"""


def outcome(tmp_path: Path, attr: str) -> tuple[bool, str]:
    p = build(tmp_path, SET, attr)
    return p.returncode == 0, (p.stdout.strip() if p.returncode == 0 else p.stderr)


def test_each_output_by_its_policy(tmp_path):
    # dev names the static archive and out propagates dev: both allowed there.
    for output in ("out", "dev", "lib", "static"):
        ok, out = outcome(tmp_path, f"cudaPackages_12_9.libfake.{output}")
        assert ok, (output, out[-2000:])
        assert not hydra.failed(out)
        report = json.loads(Path(out, "report.json").read_text())
        assert report["passed"] and report["capabilities"] is None
    # A runtime output that drags a static archive fails; the archive's own check passes.
    ok, err = outcome(tmp_path, "cudaPackages_12_9.libleak.lib")
    assert not ok and "cuda12.9-libleak-1-static" in err
    ok, _ = outcome(tmp_path, "cudaPackages_12_9.libleak.static")
    assert ok


def test_packages_and_the_index(tmp_path):
    ok, out = outcome(tmp_path, "packages.uses-fake")
    assert ok, out[-2000:]
    ok, index = outcome(tmp_path, "index")
    assert ok, index[-2000:]
    products, skipped = hydra.products(index)
    assert skipped == [] and [(p.type, p.subtype, p.path) for p in products] == [
        ("file", "json", f"{index}/index.json")]
    data = json.loads(Path(index, "index.json").read_text())
    jobs = {j["attr"]: j for j in data["jobs"]}
    assert set(jobs) == {f"cudaPackages_12_9.libfake.{o}" for o in ("out", "lib", "dev", "static")} | {
        f"cudaPackages_12_9.libleak.{o}" for o in ("out", "lib", "static")} | {"uses-fake"}
    assert all(j["checked"] for j in jobs.values())
    metrics, dropped = hydra.metrics(index)
    assert dropped == [] and metrics == {"checks.count": hydra.Metric(8, "jobs"),
                                         "checks.skipped": hydra.Metric(0, "jobs")}
