"""The overlay and the flake against the nixpkgs contract stub
(tests/contract/nixpkgs-contract-stub): what they ask of nixpkgs, what they
pass down, which derivations they create with which outputs and inputs."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(not any(os.access(os.path.join(d, "nix-instantiate"), os.X_OK)
                                        for d in os.environ.get("PATH", "").split(os.pathsep)),
                                reason="needs nix-instantiate (Debian's nix-bin)")

STUB = "./tests/contract/nixpkgs-contract-stub"


def nix_eval(expr: str, check: bool = True):
    env = {k: v for k, v in os.environ.items() if k != "NIX_PATH"}
    p = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    return p


def pkgs(overlays: str = "[ (import ./overlays).default ]", config: str = "{ }", system: str = "x86_64-linux"):
    return f'(import {STUB} {{ system = "{system}"; overlays = {overlays}; config = {config}; }})'


FLAKE = "(import ./tests/contract/flake-outputs.nix)"


def test_options_are_read_from_config_and_passed_down():
    got = nix_eval(f"""
      let p = {pkgs(config='{ cudaSupport = true; cudaCapabilities = [ "9.0" "8.6" ]; cudaForwardCompat = false; }')};
      in {{ inherit (p.nixcuda) cudaSupport cudaCapabilities cudaForwardCompat; flags = p.nixcuda.flagsFor "13.0"; }}
    """)
    assert got["cudaSupport"] is True and got["cudaCapabilities"] == ["9.0", "8.6"] and got["cudaForwardCompat"] is False
    assert got["flags"]["capabilities"] == ["8.6", "9.0"] and got["flags"]["torchCudaArchList"] == "8.6;9.0"
    defaults = nix_eval(f"let p = {pkgs()}; in {{ inherit (p.nixcuda) cudaSupport cudaForwardCompat; "
                        f"caps = (p.nixcuda.flagsFor \"13.0\").capabilities; }}")
    assert defaults == {"cudaSupport": False, "cudaForwardCompat": True,
                        "caps": ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1"]}


def test_bad_options_fail_evaluation_with_every_problem():
    bad = '{ cudaCapabilities = [ "8.7" "6.1" ]; }'
    p = nix_eval(f'({pkgs(config=bad)}).nixcuda.flagsFor "13.0"', check=False)
    assert p.returncode != 0
    assert "Jetson capabilities (8.7) need an aarch64-linux system, not x86_64-linux" in p.stderr
    assert '"6.1" (Pascal) is not supported by CUDA 13.0' in p.stderr
    jetson = '{ cudaCapabilities = [ "8.7" ]; }'
    ok = nix_eval(f'({pkgs(config=jetson, system="aarch64-linux")}).nixcuda.flagsFor "12.9"')
    assert ok["isJetson"] is True


@pytest.mark.parametrize("name", ["options", "tools"])
def test_each_overlay_works_alone(name):
    got = nix_eval(f"builtins.attrNames ({pkgs(overlays=f'[ (import ./overlays).{name} ]')})")
    assert ("nixcuda" in got) == (name == "options") and ("closure-audit" in got) == (name == "tools")


def test_closure_audit_package():
    a = nix_eval(f"""
      let p = {pkgs()}; d = p.closure-audit; in {{
        kind = d.stubKind; inherit (d.stubArgs) pname version pyproject makeWrapperArgs disabledTestMarks pythonImportsCheck;
        build = map (x: x.name) d.stubArgs.build-system;
        deps = map (x: x.name) d.stubArgs.dependencies;
        checks = map (x: x.name) d.stubArgs.nativeCheckInputs;
        files = map toString d.stubArgs.src.fileset.files;
        root = toString d.stubArgs.src.root;
        nix = "${{p.nix}}";
        main = d.meta.mainProgram;
      }}
    """)
    init = (ROOT / "tools/closure_audit/__init__.py").read_text()
    assert a["kind"] == "buildPythonApplication" and a["pyproject"] is True
    assert a["version"] == re.search(r'__version__ = "([^"]+)"', init).group(1)
    assert a["build"] == ["setuptools"] and a["deps"] == ["pyelftools", "networkx", "rich"]
    assert a["makeWrapperArgs"] == ["--prefix", "PATH", ":", a["nix"] + "/bin"]
    assert a["checks"] == ["pytestCheckHook", "hypothesis", "jsonschema", "patchelf"]
    assert a["disabledTestMarks"] == ["wheels"] and a["pythonImportsCheck"] == ["closure_audit"]
    assert a["main"] == "closure-audit" and a["root"] == str(ROOT)
    rel = {os.path.relpath(f, ROOT) for f in a["files"]}
    assert {"pyproject.toml", "tools", "lib/data", "tests"} <= rel
    for f in a["files"]:
        assert os.path.exists(f), f


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_flake_outputs(system):
    f = nix_eval(f"""
      let f = {FLAKE}; s = "{system}"; pkgs = f.legacyPackages.${{s}}; in {{
        top = builtins.attrNames f;
        overlays = builtins.attrNames f.overlays;
        overlayIsFunction = builtins.isFunction f.overlays.default;
        libHasFlags = builtins.isFunction f.lib.cuda.flags;
        config = {{ inherit (pkgs.config) cudaSupport allowUnfree; }};
        predicate = map pkgs.config.allowUnfreePredicate [
          {{ meta.license = f.lib.cuda.licenses.cuda; }}
          {{ meta.license = {{ shortName = "unfree"; free = false; }}; }}
        ];
        overlayApplied = pkgs ? closure-audit && pkgs ? nixcuda;
        packages = builtins.attrNames f.packages.${{s}};
        package = f.packages.${{s}}.closure-audit.name;
        app = {{ inherit (f.apps.${{s}}.closure-audit) type program; }};
        checks = builtins.attrNames f.checks.${{s}};
        libCheck = {{ inherit (f.checks.${{s}}.lib.stubArgs) failures; kind = f.checks.${{s}}.lib.stubKind; }};
        formatter = f.formatter.${{s}}.name;
        shell = {{
          inputsFrom = map (x: x.name) f.devShells.${{s}}.default.stubArgs.inputsFrom;
          packages = map (x: x.name) f.devShells.${{s}}.default.stubArgs.packages;
        }};
      }}
    """)
    assert set(f["top"]) >= {"overlays", "lib", "legacyPackages", "packages", "apps", "checks", "formatter",
                              "devShells"}
    assert "default" in f["overlays"] and {"options", "tools"} <= set(f["overlays"])
    assert f["overlayIsFunction"] and f["libHasFlags"] and f["overlayApplied"]
    assert f["config"] == {"cudaSupport": True, "allowUnfree": False}
    assert f["predicate"] == [True, False]
    assert f["package"].startswith("closure-audit-") and {"closure-audit", "default"} <= set(f["packages"])
    assert f["app"]["type"] == "app" and f["app"]["program"].endswith("-closure-audit-0.1.0/bin/closure-audit")
    assert f["checks"] == ["closure-audit", "lib"]
    assert f["libCheck"] == {"failures": [], "kind": "runCommand"}
    assert f["formatter"] == "treefmt"
    assert f["shell"]["inputsFrom"][0].startswith("closure-audit") and "nix" in f["shell"]["packages"]


def test_flake_lock_pins_nixpkgs():
    lock = json.loads((ROOT / "flake.lock").read_text())
    assert lock["version"] == 7 and lock["root"] == "root"
    assert lock["nodes"]["root"]["inputs"] == {"nixpkgs": "nixpkgs"}
    assert lock["nodes"]["nixpkgs"]["locked"] == {
        "lastModified": 1763649943,
        "narHash": "sha256-lOJuTEsKdr3bEkjK2I5cMt7kNVG5zAeYlm2PXFHC22M=",
        "owner": "NixOS", "repo": "nixpkgs", "rev": "9a0231af9b19ed3d5716fb8dab613019c30a80b5", "type": "github",
    }


def test_nix_reads_the_flake_and_its_lock(tmp_path):
    """Nix itself accepts flake.nix and flake.lock (metadata only: nothing is fetched)."""
    import shutil

    if shutil.which("nix") is None:
        pytest.skip("needs nix")
    copy = tmp_path / "flake"
    copy.mkdir()
    for name in ("flake.nix", "flake.lock"):
        shutil.copy(ROOT / name, copy / name)
    p = subprocess.run(["nix", "--extra-experimental-features", "nix-command flakes", "flake", "metadata", "--json",
                        f"path:{copy}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    meta = json.loads(p.stdout)
    assert meta["locks"]["nodes"]["nixpkgs"]["locked"]["rev"] == "9a0231af9b19ed3d5716fb8dab613019c30a80b5"
