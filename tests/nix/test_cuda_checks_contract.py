"""cudaClosureChecks (pkgs/closure-audit/cuda-checks.nix) on the nixpkgs
contract stub, evaluated by Nix: a check for every output of every
redistributable with its output's policy, the packages found from their
inputs, and the index that lists what has no check and why."""

from __future__ import annotations

import json
import tomllib

import pytest

from conftest import ROOT
from contract_eval import FLAKE, cuda, needs_nix_instantiate, nix_eval, pkgs

pytestmark = needs_nix_instantiate

# A package of the set whose input is a redistributable, one whose input's
# input is, and one without CUDA: only the first two carry CUDA code.
EXTRA = """(final: prev: {
  uses-cublas = final.stdenv.mkDerivation { pname = "uses-cublas"; version = "1"; buildInputs = [ final.cudaPackages_12_9.libcublas ]; };
  uses-uses = final.stdenv.mkDerivation { pname = "uses-uses"; version = "1"; propagatedBuildInputs = [ final.uses-cublas ]; };
  no-cuda = final.stdenv.mkDerivation { pname = "no-cuda"; version = "1"; buildInputs = [ final.zlib ]; };
  broken-cuda = final.stdenv.mkDerivation { pname = "broken-cuda"; version = "1"; buildInputs = [ final.cudaPackages_12_9.libcublas ]; meta.broken = true; };
})"""
OVERLAYS = f"[ (import ./overlays).default {EXTRA} ]"


def index(config: str, system: str = "x86_64-linux") -> dict:
    entries = nix_eval(f"({pkgs(overlays=OVERLAYS, config=config, system=system)}).cudaClosureChecks.index.entries")
    return {e["attr"]: e for e in entries}


def test_every_output_of_every_redistributable_has_a_check():
    got = nix_eval(f"""
      let
        p = {pkgs(overlays=OVERLAYS, config=cuda())};
        c = p.cudaClosureChecks;
        sets = [ "cudaPackages_12_9" "cudaPackages_13_0" ];
        ours = s: builtins.filter (n: builtins.isAttrs p.${{s}}.${{n}} && p.${{s}}.${{n}} ? redistName) (builtins.attrNames p.${{s}});
      in builtins.concatMap (s: builtins.concatMap (n: map (o: {{
        set = s; name = n; output = o;
        checked = c ? ${{s}} && c.${{s}} ? ${{n}} && c.${{s}}.${{n}} ? ${{o}};
        roots = map (r: r.outputName) c.${{s}}.${{n}}.${{o}}.stubArgs.closure.stubArgs.exportReferencesGraph.closure;
        inherit (c.${{s}}.${{n}}.${{o}}.stubArgs) budgets capabilities;
        setCapabilities = builtins.concatStringsSep "," p.${{s}}.flags.cudaCapabilities;
        storeName = builtins.substring 33 200 (baseNameOf p.${{s}}.${{n}}.${{o}}.outPath);
        hasDev = builtins.elem "dev" p.${{s}}.${{n}}.outputs;
      }}) p.${{s}}.${{n}}.outputs) (ours s)) sets
    """)
    assert len(got) > 100
    assert all(e["checked"] for e in got)
    seen = set()
    for e in got:
        assert e["roots"] == [e["output"]], e
        target = tomllib.loads(e["budgets"])["targets"]["closure"]
        o = e["output"]
        seen.add(o)
        if o in ("dev", "include") or (o == "out" and e["hasDev"]):  # out propagates dev
            assert target == {"allow": ["*-static", "*-stubs"]} and e["capabilities"] == "", e
        elif o in ("static", "stubs"):
            assert target == {"allow": [e["storeName"]]} and e["capabilities"] == "", e
            assert e["storeName"].endswith(f"-{o}")
        else:
            assert target == {} and e["capabilities"] == e["setCapabilities"], e
    # No output list of these releases has stubs (the next test makes one).
    assert {"out", "lib", "dev", "static", "bin"} <= seen


def test_a_stubs_output_allows_only_itself():
    stubs = """(final: prev: { cudaPackages_12_9 = prev.cudaPackages_12_9 // {
      libfake = final.stdenv.mkDerivation { pname = "libfake"; version = "1"; name = "cuda12.9-libfake-1";
        outputs = [ "out" "lib" "stubs" ]; passthru.redistName = "libfake"; }; }; })"""
    got = nix_eval(f"""
      let c = ({pkgs(overlays=f"[ (import ./overlays).default {stubs} ]", config=cuda())}).cudaClosureChecks; in
      {{ inherit (c.cudaPackages_12_9.libfake.stubs.stubArgs) budgets capabilities; lib = c.cudaPackages_12_9.libfake.lib.stubArgs.budgets; }}
    """)
    assert tomllib.loads(got["budgets"])["targets"]["closure"] == {"allow": ["cuda12.9-libfake-1-stubs"]}
    assert got["capabilities"] == "" and tomllib.loads(got["lib"])["targets"]["closure"] == {}


def test_packages_are_found_from_their_inputs():
    got = index(cuda())
    assert got["uses-cublas"]["checked"] and got["uses-uses"]["checked"]
    assert "no-cuda" not in got
    assert got["python3Packages.torch"]["checked"] and got["magma-cuda-static"]["checked"]
    # The redistributables are checked by output, never as packages of the set.
    assert "cudatoolkit" not in got and not any(a.startswith("cudaPackages.") for a in got)


def test_one_sets_checks_evaluate_without_scanning_the_package_set():
    """Only `packages` and `index` scan the set: an attribute that aborts
    evaluation (which tryEval cannot catch) stops them, not a set's check."""
    aborts = '(final: prev: { aborts = abort "scanned"; })'
    c = f"({pkgs(overlays=f'[ (import ./overlays).default {aborts} ]', config=cuda())}).cudaClosureChecks"
    got = nix_eval(f"{{ top = builtins.attrNames {c}; lib = {c}.cudaPackages_13_0.libcublas.lib.name; }}")
    assert got == {"top": ["cudaPackages_12_9", "cudaPackages_13_0", "index", "packages"],
                   "lib": "cuda13.0-libcublas-13.1.0.3-lib-closure-audit"}
    p = nix_eval(f"builtins.attrNames {c}.packages", check=False)
    assert p.returncode != 0 and "scanned" in p.stderr


def test_package_checks_are_under_packages():
    got = nix_eval(f"""
      let c = ({pkgs(overlays=OVERLAYS, config=cuda())}).cudaClosureChecks; in
      {{ top = builtins.attrNames c.packages; torch = c.packages.python3Packages.torch.package.name;
         capabilities = c.packages.uses-cublas.stubArgs.capabilities; }}
    """)
    assert {"uses-cublas", "uses-uses", "magma-cuda-static", "python3Packages"} <= set(got["top"])
    assert "broken-cuda" not in got["top"] and "no-cuda" not in got["top"]
    assert got["torch"] == "python3.13-torch-2.9.1"
    # A package without cudaCapabilities of its own: those of the set its
    # input belongs to are not known, so no GPU code is judged.
    assert got["capabilities"] == ""


def test_the_index_lists_broken_and_unfree_refused_packages_with_the_reason():
    got = index(cuda())
    assert got["broken-cuda"] == {"attr": "broken-cuda", "checked": False, "reason": "broken"}
    assert got["magma-cuda"]["reason"] == "broken"  # nixpkgs: dynamic magma with CUDA is broken
    # Without NVIDIA's licenses accepted, no redistributable evaluates.
    refused = index("{ cudaSupport = true; }")
    assert refused["cudaPackages_12_9.libcublas"] == {
        "attr": "cudaPackages_12_9.libcublas", "checked": False, "reason": "unfree license refused (CUDA EULA)"}
    assert refused["uses-cublas"]["reason"] == (
        "input cuda12.9-libcublas-12.9.1.4 refused: unfree license refused (CUDA EULA)")
    assert not any(e["checked"] for e in refused.values())


def test_a_redistributable_of_another_platform_is_listed_unsupported():
    other = """(final: prev: { cudaPackages_12_9 = prev.cudaPackages_12_9 // {
      libfake = final.stdenv.mkDerivation { pname = "libfake"; version = "1"; name = "cuda12.9-libfake-1";
        passthru.redistName = "libfake"; meta.platforms = [ "x86_64-linux" ]; }; }; })"""
    entries = nix_eval(f"""({pkgs(overlays=f"[ (import ./overlays).default {other} ]", config=cuda(),
                                  system="aarch64-linux")}).cudaClosureChecks.index.entries""")
    got = {e["attr"]: e for e in entries}
    assert got["cudaPackages_12_9.libfake"] == {"attr": "cudaPackages_12_9.libfake", "checked": False,
                                                "reason": "unsupported on aarch64-linux"}
    assert got["cudaPackages_12_9.libcublas.lib"]["checked"]


def test_a_capability_a_package_cannot_build_for_is_said():
    some = index(cuda('cudaCapabilities = [ "8.6" "10.0f" ];'))
    assert some["python3Packages.torch"]["checked"]
    assert some["python3Packages.torch"]["note"] == "not built for 10.0f, which it does not support"
    none = index(cuda('cudaCapabilities = [ "10.0f" ];'))
    assert none["python3Packages.torch"] == {"attr": "python3Packages.torch", "checked": False,
                                             "reason": "unsupported for the requested capabilities (10.0f)"}


def test_the_index_job():
    got = nix_eval(f"""
      let i = ({pkgs(overlays=OVERLAYS, config=cuda())}).cudaClosureChecks.index; in
      {{ inherit (i.stubArgs) indexJson checkedCount skippedCount buildCommand; inherit (i) name; }}
    """)
    data = json.loads(got["indexJson"])
    assert data["schema"] == "nixcuda-check-index/1" and data["system"] == "x86_64-linux"
    checked = [j for j in data["jobs"] if j["checked"]]
    assert got["checkedCount"] == str(len(checked)) and got["skippedCount"] == str(len(data["jobs"]) - len(checked))
    assert "hydra-build-products" in got["buildCommand"] and "hydra-metrics" in got["buildCommand"]


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_flake_checks_and_hydra_jobs_hold_the_same_checks(system):
    got = nix_eval(f"""
      let
        f = {FLAKE};
        flat = set: prefix: builtins.concatMap (n:
          let v = set.${{n}}; in
          if (v.type or null) == "derivation" then [ "${{prefix}}${{n}}" ] else flat v "${{prefix}}${{n}}.") (builtins.attrNames set);
      in {{
        checks = builtins.filter (n: builtins.substring 0 12 n == "cuda-checks.") (builtins.attrNames f.checks.{system});
        jobs = flat f.hydraJobs.cuda-checks.{system} "cuda-checks.";
      }}
    """)
    assert sorted(got["checks"]) == sorted(got["jobs"]) and "cuda-checks.index" in got["jobs"]


def test_hydra_has_a_jobset_for_the_cuda_checks():
    got = nix_eval("""
      let j = import ./ci/hydra/jobsets.nix { nixpkgs = ./tests/contract/nixpkgs-contract-stub; }; in
      j.jobsets.stubArgs.text
    """)
    jobsets = json.loads(got)
    assert set(jobsets) == {"main", "cuda-checks-main"}
    assert jobsets["main"]["type"] == 1 and jobsets["main"]["flake"].endswith("?ref=main")
    cuda_jobset = jobsets["cuda-checks-main"]
    assert cuda_jobset["nixexprpath"] == "ci/hydra/cuda-checks.nix" and cuda_jobset["type"] == 0
    assert set(cuda_jobset["inputs"]) == {"src", "nixpkgs"}
    # The jobset's expression gives the flake's cuda-checks, on the stub as nixpkgs.
    jobs = nix_eval("""
      let e = import ./ci/hydra/cuda-checks.nix { src = ./.; nixpkgs = ./tests/contract/nixpkgs-contract-stub; }; in
      { names = builtins.attrNames e; index = e.x86_64-linux.index.name; }
    """)
    assert jobs == {"names": ["aarch64-linux", "x86_64-linux"], "index": "cuda-closure-checks-index"}
    assert (ROOT / "ci/hydra/cuda-checks.nix").exists()
