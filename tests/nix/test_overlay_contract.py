"""The overlay and the flake against the nixpkgs contract stub
(tests/contract/nixpkgs-contract-stub): what they ask of nixpkgs, what they
pass down, which derivations they create with which outputs and inputs, and
that they extend nixpkgs' CUDA sets without breaking what worked without them.
The stub's own behaviours (check-meta, cudatoolkit's composition, ...) are
checked first: a stub kinder than nixpkgs would let everything else pass.
With NIXPKGS_LIB set, all of it runs on nixpkgs' real lib/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from contract_eval import FLAKE, PREDICATE, REAL_LIB, cuda, error_line, needs_nix_instantiate, nix_eval, pkgs
from parts import require

pytestmark = needs_nix_instantiate

SETS = {"12.9": ("cudaPackages_12_9", "12.9.1", "cuda12"), "13.0": ("cudaPackages_13_0", "13.0.2", "cuda13")}
PLATFORM = {"x86_64-linux": "linux-x86_64", "aarch64-linux": "linux-sbsa"}
TOOLCHAIN = {"cuda_nvcc", "cuda_crt", "libnvvm"}


def output_lists(release: str, variant: str) -> dict:
    lists = json.loads((ROOT / f"pkgs/cuda/outputs/{release}.json").read_text())["packages"]
    lists.update(json.loads((ROOT / f"pkgs/cuda/outputs/cudnn-9.27.0-{variant}.json").read_text())["packages"])
    return lists


# The stub itself: nixpkgs' behaviours the overlay depends on.

def test_check_meta_refuses_broken_unfree_and_unsupported_packages_on_evaluation():
    got = nix_eval(f"""
      let
        p = {pkgs(overlays="[ ]")};
        mk = meta: p.stdenv.mkDerivation {{ pname = "x"; version = "1"; inherit meta; }};
        try = d: (builtins.tryEval d.drvPath).success;
        unfree = {{ license = p.lib.licenses.nvidiaCudaRedist; }};
        allowed = import {ROOT}/tests/contract/nixpkgs-contract-stub {{
          system = "x86_64-linux"; config = {{ {PREDICATE} }}; }};
      in {{
        plain = try (mk {{ }});
        broken = try (mk {{ broken = true; }});
        brokenName = (mk {{ broken = true; }}).name;
        unfree = try (mk unfree);
        unfreeWithPredicate = try (allowed.stdenv.mkDerivation {{ pname = "x"; version = "1"; meta = unfree; }});
        badPlatform = try (mk {{ badPlatforms = [ "x86_64-linux" ]; }});
        otherPlatform = try (mk {{ platforms = [ "aarch64-linux" ]; }});
        available = (mk {{ broken = true; }}).meta.available;
        # An input that fails makes its dependent fail.
        dependent = try (p.stdenv.mkDerivation {{ name = "y"; buildInputs = [ (mk {{ broken = true; }}) ]; }});
        asString = (builtins.tryEval "${{(mk {{ broken = true; }})}}").success;
      }}
    """)
    assert got == {"plain": True, "broken": False, "brokenName": "x-1", "unfree": False, "unfreeWithPredicate": True,
                   "badPlatform": False, "otherPlatform": False, "available": False, "dependent": False,
                   "asString": False}
    p = nix_eval(f'({pkgs(overlays="[ ]")}.stdenv.mkDerivation {{ pname = "x"; version = "1"; meta.broken = true; }}).drvPath',
                 check=False)
    assert "Package ‘x-1’ is marked as broken, refusing to evaluate." in p.stderr


def test_nixpkgs_cuda_members_follow_build_redist():
    got = nix_eval(f"""
      let
        on = {pkgs(overlays="[ ]", config=cuda())};
        off = {pkgs(overlays="[ ]", config="{ " + PREDICATE + " }")};
        try = d: (builtins.tryEval d.drvPath).success;
      in {{
        nvcc = on.cudaPackages_12_9.cuda_nvcc.name;
        nvccOutputs = on.cudaPackages_12_9.cuda_nvcc.outputs;
        withCuda = try on.cudaPackages_12_9.libcublas;
        withoutCudaSupport = try off.cudaPackages_12_9.libcublas;
        # cuda_crt has a package file but no 12.9 redistributable.
        crt129 = try on.cudaPackages_12_9.cuda_crt;
        crt129Version = on.cudaPackages_12_9.cuda_crt.version;
        crt130 = try on.cudaPackages_13_0.cuda_crt;
        toolkit = try on.cudaPackages_12_9.cudatoolkit;
        toolkitPaths = builtins.length on.cudaPackages_13_0.cudatoolkit.stubArgs.paths;
      }}
    """)
    assert got["nvcc"] == "cuda12.9-cuda_nvcc-12.9.86" and got["nvccOutputs"] == ["out"]
    assert got["withCuda"] and not got["withoutCudaSupport"]
    assert not got["crt129"] and got["crt129Version"] == "0-unsupported" and got["crt130"]
    assert got["toolkit"] and got["toolkitPaths"] > 20


def test_cudatoolkit_fails_when_one_of_its_parts_fails():
    """packages/cudatoolkit.nix joins cuobjdump, gdb, nvdisasm, nvprune, ...:
    one broken part is enough to break it, as on main, where every member
    without an output list was broken."""
    broken = "[ (final: prev: { cudaPackages_12_9 = prev.cudaPackages_12_9.overrideScope (f: p: { " \
             "cuda_nvprune = p.cuda_nvprune.overrideAttrs (o: { meta = o.meta // { broken = true; }; }); }); }) ]"
    p = nix_eval(f"({pkgs(overlays=broken, config=cuda())}).cudaPackages_12_9.cudatoolkit.drvPath", check=False)
    assert p.returncode != 0 and "cuda12.9-cuda_nvprune-12.9.82’ is marked as broken" in error_line(p.stderr)


def test_triton_cuda_reads_cuobjdump_nvdisasm_and_ptxas():
    got = nix_eval(f"""
      let t = ({pkgs(overlays="[ ]", config=cuda())}).python3Packages.triton-cuda; in
      {{ inherit (t.stubArgs.env) TRITON_PTXAS_PATH TRITON_CUOBJDUMP_PATH TRITON_NVDISASM_PATH; }}
    """)
    assert re.search(r"-cuda12\.9-cuda_nvcc-[\d.]+/bin/ptxas$", got["TRITON_PTXAS_PATH"])
    assert "cuda_cuobjdump" in got["TRITON_CUOBJDUMP_PATH"] and "cuda_nvdisasm" in got["TRITON_NVDISASM_PATH"]


def test_magma_dynamic_with_cuda_is_broken():
    got = nix_eval(f"""
      let p = {pkgs(overlays="[ ]", config=cuda())}; try = d: (builtins.tryEval d.drvPath).success; in
      {{ magma = try p.magma; static = try p.magma-cuda-static; }}
    """)
    assert got == {"magma": False, "static": True}


def test_python_builders_name_and_refuse_as_nixpkgs():
    """A Python package's name carries the interpreter's prefix, an
    application's none; one that sets neither pyproject nor format has a name
    but no drvPath (nixpkgs 25.11 refuses it)."""
    let = f"""
      let
        ps = ({pkgs(overlays="[ ]")}).python3Packages;
        args = {{ pname = "x"; version = "1"; }};
        package = ps.buildPythonPackage (args // {{ pyproject = true; }});
        app = ps.buildPythonApplication (args // {{ format = "setuptools"; }});
        bare = ps.buildPythonApplication args;
        try = d: (builtins.tryEval d.drvPath).success;
      in"""
    got = nix_eval(f"{let} {{ names = map (d: d.name) [ package app bare ]; ok = map try [ package app bare ]; }}")
    assert got == {"names": ["python3.13-x-1", "x-1", "x-1"], "ok": [True, True, False]}
    p = nix_eval(f"{let} bare.drvPath", check=False)
    assert p.returncode != 0 and "x-1 does not configure a `format`" in error_line(p.stderr)


def test_nixpkgs_torch_refuses_cuda_13_and_mismatched_magma():
    got = nix_eval(f"""
      let
        p = {pkgs(overlays="[ ]", config=cuda())};
        t = p.python3Packages.torch;
      in {{
        default = (builtins.tryEval t.drvPath).success;
        cuda13 = builtins.attrNames (t.override {{ cudaPackages = p.cudaPackages_13_0; }}).brokenConditions;
        magma = builtins.attrNames (t.override {{
          effectiveMagma = p.magma-cuda-static.override {{ cudaPackages = p.cudaPackages_13_0; }}; }}).brokenConditions;
      }}
    """)
    assert got == {"default": True, "cuda13": ["Magma cudaPackages does not match cudaPackages",
                                               "Unsupported CUDA version"],
                   "magma": ["Magma cudaPackages does not match cudaPackages"]}
    # No `...`: an argument nixpkgs' torch does not take is an error.
    p = nix_eval(f"(({pkgs(overlays='[ ]', config=cuda())}).python3Packages.torch.override {{ noSuchArgument = 1; }}).name",
                 check=False)
    assert "called with unexpected argument 'noSuchArgument'" in error_line(p.stderr)


def test_the_stub_lib_agrees_with_nixpkgs_lib():
    """Only with NIXPKGS_LIB: the stub's own lib.nix, function by function,
    against nixpkgs' real lib on the same inputs."""
    if not REAL_LIB:
        pytest.skip("set NIXPKGS_LIB to nixpkgs' lib/ (nix-community/nixpkgs.lib) to compare")
    probe = """
      lib: let
        drv = { out = { outPath = "o"; }; lib = { outPath = "l"; }; outPath = "o"; };
        f = { a, b ? 1 }: { inherit a b; overrideAttrs = g: { }; };
        o = lib.makeOverridable f { a = 1; };
        scope = lib.makeScope (extra: lib.callPackageWith extra) (self: { x = 1; y = self.x + 1; });
      in {
        fix = lib.fix (self: { a = 1; b = self.a + 1; });
        ext = lib.fix (lib.extends (final: prev: { b = prev.a + 10; }) (self: { a = 1; b = 0; }));
        compose = (lib.composeManyExtensions [ (f: p: { a = 1; }) (f: p: { b = p.a + 1; }) ] { } { });
        override = (o.override { b = 5; }).b;
        overrideFn = (o.override (old: { a = old.a + 1; })).a;
        args = lib.functionArgs o.override;
        scope = (scope.overrideScope (f: p: { x = 10; })).y;
        getLib = (lib.getLib drv).outPath;
        getDevFallback = (lib.getDev drv).outPath;
        getInclude = (lib.getInclude drv).outPath;
        versions = [ (lib.versions.major "12.9.1") (lib.versions.majorMinor "12.9.1") ];
        compare = [ (lib.versionAtLeast "13.0" "13") (lib.versionOlder "12.9" "13.0") ];
        lists = [ (lib.intersectLists [ 1 2 ] [ 2 3 1 ]) (lib.subtractLists [ 1 ] [ 1 2 ]) (lib.unique [ 1 1 2 ]) ];
        attrs = lib.filterAttrs (n: v: v > 1) { a = 1; b = 2; };
        genAttrs = lib.genAttrs [ "a" ] (n: n);
        exe = lib.getExe' { type = "derivation"; bin = { outPath = "b"; }; outPath = "o"; } "ptxas";
        cuda = lib.licenses.nvidiaCudaRedist.shortName;
      }
    """
    stub = nix_eval(f"({probe}) (import {ROOT}/tests/contract/nixpkgs-contract-stub/lib.nix)")
    real = nix_eval(f"({probe}) (import {ROOT}/tests/contract/nixpkgs-contract-stub/select-lib.nix)")
    assert stub == real


# The overlay.

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


@pytest.mark.parametrize("name", ["options", "tools", "hooks", "driver-runpath", "cuda-packages", "default"])
def test_each_overlay_works_alone(name):
    # What the overlay itself defines, applied to the stub's nixpkgs.
    got = nix_eval(f"let ov = (import ./overlays).{name}; final = {pkgs(overlays='[ ov ]')}; "
                   f"prev = {pkgs(overlays='[ ]')}; in builtins.attrNames (ov final prev)")
    hooks = {"autoAddOpenGLRunpathHook", "splitRedistOutputsHook"}
    sets = {"nixcuda", "cudaPackages_12_9", "cudaPackages_13_0"} | hooks
    brings = {"options": {"nixcuda"}, "tools": {"closure-audit"}, "hooks": hooks,
              "driver-runpath": hooks | {"autoAddDriverRunpath"}, "cuda-packages": sets,
              "default": sets | {"closure-audit", "pythonPackagesExtensions"}}
    ours = {"nixcuda", "closure-audit", "autoAddOpenGLRunpathHook", "autoAddDriverRunpath", "splitRedistOutputsHook",
            "cudaPackages", "cudaPackages_12_9", "cudaPackages_13_0", "pythonPackagesExtensions"}
    assert set(got) & ours == brings[name]


def _fileset_needs_a_newer_nix():
    """nixpkgs' lib.fileset at the pin needs builtins.readFileType (Nix 2.14);
    Debian's Nix 2.8 has none, so on the real lib closure-audit's source
    cannot be selected here."""
    if REAL_LIB and not nix_eval("builtins ? readFileType"):
        pytest.skip("nixpkgs' lib.fileset needs builtins.readFileType (Nix 2.14 or newer); this Nix has none")


def test_closure_audit_package():
    _fileset_needs_a_newer_nix()
    a = nix_eval(f"""
      let p = {pkgs()}; d = p.closure-audit; in {{
        kind = d.stubKind; inherit (d.stubArgs) pname version pyproject makeWrapperArgs disabledTestMarks pythonImportsCheck;
        build = map (x: x.name) d.stubArgs.build-system;
        deps = map (x: x.name) d.stubArgs.dependencies;
        checks = map (x: x.name) d.stubArgs.nativeCheckInputs;
        files = if d.stubArgs.src ? fileset then map toString d.stubArgs.src.fileset.files else null;
        src = "${{d.stubArgs.src}}";
        nix = "${{p.nix}}";
        main = d.meta.mainProgram;
      }}
    """)
    init = (ROOT / "tools/closure_audit/__init__.py").read_text()
    assert a["kind"] == "buildPythonApplication" and a["pyproject"] is True
    assert a["version"] == re.search(r'__version__ = "([^"]+)"', init).group(1)
    assert a["build"] == ["setuptools"] and a["deps"] == ["numpy", "igraph", "orjson", "rich", "cryptography",
                                                          "zstandard", "lz4"]
    assert a["makeWrapperArgs"] == ["--prefix", "PATH", ":", a["nix"] + "/bin"]
    assert a["checks"] == ["pytestCheckHook", "hypothesis", "jsonschema", "networkx", "pyelftools", "patchelf"]
    assert a["disabledTestMarks"] == ["wheels"] and a["pythonImportsCheck"] == ["closure_audit"]
    assert a["main"] == "closure-audit"
    if REAL_LIB:
        # nixpkgs' lib.fileset copies the selection into the store.
        src = a["src"]
        assert src.startswith("/nix/store/") and os.path.exists(os.path.join(src, "pyproject.toml"))
        assert sorted(os.listdir(src)) == sorted(["pyproject.toml", "setup.py", "README.md", "LICENSE", "tools", "lib", "docs",
                                                  "examples", "tests"])
    else:
        assert a["src"] == str(ROOT)
        rel = {os.path.relpath(f, ROOT) for f in a["files"]}
        assert {"pyproject.toml", "setup.py", "tools", "lib/data", "tests"} <= rel
        for f in a["files"]:
            assert os.path.exists(f), f


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_flake_outputs(system):
    _fileset_needs_a_newer_nix()
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
    assert {"default", "options", "tools", "driver-runpath"} <= set(f["overlays"])
    assert f["overlayIsFunction"] and f["libHasFlags"] and f["overlayApplied"]
    assert f["config"] == {"cudaSupport": True, "allowUnfree": False}
    assert f["predicate"] == [True, False]
    assert f["package"].startswith("closure-audit-") and {"closure-audit", "default"} <= set(f["packages"])
    assert f["app"]["type"] == "app" and f["app"]["program"].endswith("-closure-audit-0.1.0/bin/closure-audit")
    # The CUDA set's checks are tests/nix/test_cuda_checks_contract.py's.
    assert [c for c in f["checks"] if not c.startswith("cuda-checks.")] == [
        "closure-audit", "lib", "torch-archs", "torch-closure"]
    assert "cuda-checks.index" in f["checks"]
    assert f["libCheck"] == {"failures": [], "kind": "runCommand"}
    assert f["formatter"] == "nixfmt-tree"
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

    require("nix", shutil.which("nix") is not None)
    copy = tmp_path / "flake"
    copy.mkdir()
    for name in ("flake.nix", "flake.lock"):
        shutil.copy(ROOT / name, copy / name)
    p = subprocess.run(["nix", "--extra-experimental-features", "nix-command flakes", "flake", "metadata", "--json",
                        f"path:{copy}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    meta = json.loads(p.stdout)
    assert meta["locks"]["nodes"]["nixpkgs"]["locked"]["rev"] == "9a0231af9b19ed3d5716fb8dab613019c30a80b5"


def _repository_copy(dest):
    """The repository as a flake sees it: what .gitignore leaves, without .git."""
    ignored = [line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", *ignored))
    return dest


def test_nix_evaluates_the_flake_on_the_stub(tmp_path):
    """Nix itself evaluates the flake (`nix flake show`, `nix flake check
    --no-build`), its nixpkgs input the contract stub as a flake
    (tests/contract/stub-flake): outputs of the right kinds, overlays as Nix
    wants them, derivations whose drvPaths are store paths."""
    require("nix", shutil.which("nix") is not None)
    flake = _repository_copy(tmp_path / "nixcuda")
    stub = _repository_copy(tmp_path / "nixpkgs")
    for name in ("flake.nix", "default.nix"):
        shutil.copy(ROOT / "tests/contract/stub-flake" / name, stub / name)
    args = [f"path:{flake}", "--override-input", "nixpkgs", f"path:{stub}"]

    def nix_flake(*command):
        p = subprocess.run(["nix", "--extra-experimental-features", "nix-command flakes", "flake", *command, *args],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout

    shown = json.loads(nix_flake("show", "--json"))
    system = {"x86_64": "x86_64-linux", "aarch64": "aarch64-linux"}[os.uname().machine]
    assert shown["packages"][system]["default"]["name"].startswith("closure-audit-")
    assert shown["apps"][system]["closure-audit"]["type"] == "app"
    checks = set(shown["checks"][system])
    assert {c for c in checks if not c.startswith("cuda-checks.")} == {"closure-audit", "lib", "torch-archs",
                                                                        "torch-closure"}
    # Nix takes every CUDA check as a derivation, the index among them.
    assert "cuda-checks.index" in checks and len(checks) > 100
    assert {shown["checks"][system][c]["type"] for c in checks} == {"derivation"}
    assert shown["formatter"][system]["name"] == "nixfmt-tree"
    assert shown["devShells"][system]["default"]["type"] == "derivation"
    assert {o["type"] for o in shown["overlays"].values()} == {"nixpkgs-overlay"}
    # Since Nix 2.16 flake check evaluates only this system's outputs unless asked.
    version = re.search(r"(\d+)\.(\d+)", subprocess.run(["nix", "--version"], capture_output=True,
                                                          text=True).stdout)
    every_system = ["--all-systems"] if tuple(map(int, version.groups())) >= (2, 16) else []
    nix_flake("check", "--no-build", *every_system)


# The CUDA package sets.

def _members(system: str, config: str, breaking: str = "") -> dict:
    """Every member of both sets, with and without the overlay (and
    `breaking` after it): whose it is, and whether its drvPath evaluates."""
    return nix_eval(f"""
      let
        with' = {pkgs(overlays=f"[ (import ./overlays).default {breaking} ]", config=config, system=system)};
        without = {pkgs(overlays="[ ]", config=config, system=system)};
        ok = d: (builtins.tryEval (builtins.deepSeq d.drvPath d.drvPath)).success;
        isDrv = d: builtins.isAttrs d && d ? drvPath && d ? stubArgs;
        ours = d: d.stubArgs ? splitRedistStrict;
        summary = set: builtins.mapAttrs (n: d: {{ ours = ours d; ok = ok d; name = d.name; }})
          (with'.lib.filterAttrs (n: isDrv) set);
      in builtins.listToAttrs (map (s: {{ name = s; value = {{
        with' = summary with'.${{s}}; without = summary without.${{s}};
      }}; }}) [ "cudaPackages_12_9" "cudaPackages_13_0" ])
    """)


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
@pytest.mark.parametrize("config", [cuda(), cuda('cudaCapabilities = [ "8.6" ];')], ids=["defaults", "8.6"])
def test_no_member_that_evaluates_without_the_overlay_fails_with_it(system, config):
    got = _members(system, config)
    for version, (attr, release, variant) in SETS.items():
        lists = output_lists(release, variant)
        with_, without = got[attr]["with'"], got[attr]["without"]
        regressions = [n for n, m in without.items() if m["ok"] and not with_[n]["ok"]]
        assert regressions == [], (attr, regressions)
        # Ours exactly where an output list exists for the platform; the
        # compiler's parts and everything else stay nixpkgs'.
        replaced = {n for n, m in with_.items() if m["ours"]}
        expected = {n for n, platforms in lists.items() if PLATFORM[system] in platforms} - TOOLCHAIN
        assert replaced == expected, attr
        assert {"cudatoolkit", "cuda_cuobjdump", "cuda_gdb", "cuda_nvdisasm", "cuda_nvprune"} <= set(with_)
        assert with_["cudatoolkit"]["ok"] and not with_["cuda_cuobjdump"]["ours"]


def test_a_member_broken_by_the_overlay_would_be_caught():
    """The check above can fail: one member broken by the overlay (as on main,
    every member without an output list) is a regression of it and of every
    member built on it."""
    breaking = "(final: prev: { cudaPackages_12_9 = prev.cudaPackages_12_9.overrideScope (f: p: { " \
               "libcublas = p.libcublas.overrideAttrs (o: { meta = o.meta // { broken = true; }; }); }); })"
    s = _members("x86_64-linux", cuda(), breaking=breaking)["cudaPackages_12_9"]
    regressions = {n for n, m in s["without"].items() if m["ok"] and not s["with'"][n]["ok"]}
    assert {"libcublas", "libcusolver", "cudnn", "cudatoolkit"} <= regressions


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_our_members(system):
    got = nix_eval(f"""
      let
        p = {pkgs(config=cuda(), system=system)};
        summary = set: builtins.mapAttrs (name: d: let
          available = (builtins.tryEval (builtins.deepSeq d.stubArgs.src.stubArgs.url true)).success; in {{
            inherit (d) name pname outputs;
            platforms = d.meta.platforms;
            broken = d.meta.broken;
            inherit available;
            url = if available then d.stubArgs.src.stubArgs.url else null;
            sha256 = if available then d.stubArgs.src.stubArgs.sha256 else null;
            hooks = map (x: x.name) d.stubArgs.nativeBuildInputs;
            deps = map (x: x.name) d.stubArgs.buildInputs;
            strict = d.stubArgs.splitRedistStrict;
          }}) (p.lib.filterAttrs (n: d: builtins.isAttrs d && d ? stubArgs && d.stubArgs ? splitRedistStrict) set);
      in {{ "12.9" = summary p.cudaPackages_12_9; "13.0" = summary p.cudaPackages_13_0; }}
    """)
    platform = PLATFORM[system]
    cudnn = json.loads((ROOT / "pkgs/cuda/manifests/redistrib_9.27.0.json").read_text())
    for version, (attr, release, variant) in SETS.items():
        cuda_manifest = json.loads((ROOT / f"pkgs/cuda/manifests/redistrib_{release}.json").read_text())
        lists = output_lists(release, variant)
        for name, d in got[version].items():
            manifest = cuda_manifest if name in cuda_manifest else cudnn
            entry = manifest[name]
            # nixpkgs' naming: pname is the package, the store name says the set.
            assert d["pname"] == name and d["name"] == f"cuda{version}-{name}-{entry['version']}"
            archive = entry[platform]
            if name in cudnn:
                archive = archive[variant]
            assert system in d["platforms"] and d["available"], name
            product = "cuda" if name in cuda_manifest else "cudnn"
            assert d["url"] == f"https://developer.download.nvidia.com/compute/{product}/redist/{archive['relative_path']}"
            assert d["sha256"] == archive["sha256"], name
            assert d["hooks"] == ["autoPatchelfHook", "auto-add-opengl-runpath-hook", "split-redist-outputs-hook",
                                  "mark-for-cudatoolkit-root-hook"]
            listed = lists[name][platform]
            assert not d["broken"] and d["outputs"] == ["out", *listed["outputs"]], name
            assert d["strict"] is listed["inspected"].startswith("tarball")
            # A member of one set never pulls in a member of another.
            for dep in d["deps"]:
                if re.match(r"cuda\d+\.\d+-", dep):
                    assert dep.startswith(f"cuda{version}-"), (name, dep)


def test_sets_stand_alone_without_a_nixpkgs_scope():
    """On a nixpkgs without these releases, every redistributable is nixcuda's;
    one without an output list is broken, saying why through meta."""
    got = nix_eval(f"""
      let p = {pkgs(overlays='[ (final: prev: { cudaPackages_12_9 = null; cudaPackages_13_0 = null; }) (import ./overlays).default ]', config=cuda())};
          s = p.cudaPackages_13_0;
      in {{ nvcc = s.cuda_nvcc.name; outs = s.cuda_nvcc.outputs; scoped = s ? overrideScope;
           gdb = s.cuda_gdb.meta.broken; inherit (s) cudaMajorMinorVersion cudaMajorVersion cudaMajorMinorPatchVersion;
           atLeast = s.cudaAtLeast "13.0"; torch = p.python3Packages.torch.cudaPackages.cudaMajorMinorVersion; }}
    """)
    assert got == {"nvcc": "cuda13.0-cuda_nvcc-13.0.88", "outs": ["out", "bin", "dev"], "scoped": False, "gdb": True,
                   "cudaMajorMinorVersion": "13.0", "cudaMajorVersion": "13", "cudaMajorMinorPatchVersion": "13.0.2",
                   "atLeast": True, "torch": "12.9"}


def test_nixpkgs_default_cuda_set_and_its_versions_are_left_alone():
    got = nix_eval(f"""
      let
        p = {pkgs(config=cuda())}; prev = {pkgs(overlays="[ ]", config=cuda())};
        s = p.cudaPackages_12_9;
      in {{
        same = p.cudaPackages.cudaMajorMinorVersion == prev.cudaPackages.cudaMajorMinorVersion;
        inherit (s) cudaMajorMinorVersion cudaMajorVersion cudaMajorMinorPatchVersion;
        hasCudaVersion = s ? cudaVersion;
        about = s.nixcudaRelease;
        toolkitName = s.cudatoolkit.name;
      }}
    """)
    assert got == {"same": True, "cudaMajorMinorVersion": "12.9", "cudaMajorVersion": "12",
                   "cudaMajorMinorPatchVersion": "12.9.1", "hasCudaVersion": False,
                   "about": {"cudaMajorMinorPatchVersion": "12.9.1", "cudnnVersion": "9.27.0",
                             "redistSystem": "linux-x86_64"},
                   "toolkitName": "cuda-merged-12.9"}


def test_the_releases_are_listed_once():
    data = json.loads((ROOT / "pkgs/cuda/releases.json").read_text())
    got = nix_eval(f"""
      let p = {pkgs(config=cuda())}; l = (import ./lib).cuda; in {{
        inherit (l) cudaVersions releases torchCudaVersion;
        sets = builtins.filter (n: builtins.match "cudaPackages_[0-9]+_[0-9]+" n != null)
          (builtins.attrNames ((import ./overlays).cuda-packages p {pkgs(overlays="[ ]", config=cuda())}));
      }}
    """)
    assert got["releases"] == data["sets"] and got["cudaVersions"] == sorted(data["sets"])
    assert got["sets"] == sorted("cudaPackages_" + v.replace(".", "_") for v in data["sets"])
    assert got["torchCudaVersion"] == data["torch"]
    # No other file names a release.
    for path in ("lib/cuda/default.nix", "pkgs/cuda/default.nix", "overlays/cuda-packages.nix",
                 "overlays/python-packages.nix", "pkgs/torch/default.nix"):
        text = "\n".join(line for line in (ROOT / path).read_text().splitlines()
                         if not line.lstrip().startswith("#"))
        for release in data["sets"].values():
            assert release["cuda"] not in text and release["cudnn"] not in text, path
        assert not re.search(r'"1[23]\.[0-9]"', text), path


@pytest.mark.parametrize("config", [cuda(), cuda('cudaCapabilities = [ "9.0" "8.6" ];'),
                                    cuda('cudaCapabilities = [ "8.6" "9.0a" ]; cudaForwardCompat = false;')])
def test_every_target_field_comes_from_one_source(config):
    got = nix_eval(f"""
      let p = {pkgs(config=config)}; f = p.cudaPackages_12_9.flags; in {{
        flags = builtins.removeAttrs f [ "dropDots" "dropDot" "cudaComputeCapabilityToName" ];
        names = map f.cudaComputeCapabilityToName f.cudaCapabilities;
        ours = p.nixcuda.flagsFor "12.9";
        magma = p.magma-cuda-static.override {{ cudaPackages = p.cudaPackages_12_9; }};
        magmaFlags = (p.magma-cuda-static.override {{ cudaPackages = p.cudaPackages_12_9; }}).stubArgs.cmakeFlags;
      }}
    """)
    f, ours = got["flags"], got["ours"]
    for key, value in ours.items():
        assert f[key] == value, key
    assert f["cudaCapabilities"] == ours["capabilities"] and f["cudaForwardCompat"] == ours["forwardCompat"]
    assert f["realArches"] == f["realArchs"] == ours["realArchs"]
    assert f["virtualArches"] == ours["virtualArchs"]
    assert f["gencodeString"] == " ".join(ours["gencode"])
    ptx = [] if ours["ptxCapability"] is None else ["compute_" + ours["ptxCapability"].replace(".", "")]
    assert f["arches"] == f["archs"] == ours["realArchs"] + ptx
    assert f["cmakeCudaArchitecturesString"] == ours["cmakeCudaArchitectures"]
    assert f["isJetsonBuild"] is ours["isJetson"] and set(got["names"]) == set(ours["archNames"])
    # magma builds for the same GPUs.
    assert f"-DCMAKE_CUDA_ARCHITECTURES={ours['cmakeCudaArchitectures']}" in got["magmaFlags"]


def test_cudnn_takes_the_matching_cuda_variant():
    got = nix_eval(f"""
      let p = {pkgs(config=cuda())}; in {{
        "12.9" = p.cudaPackages_12_9.cudnn.stubArgs.src.stubArgs.url;
        "13.0" = p.cudaPackages_13_0.cudnn.stubArgs.src.stubArgs.url;
        deps = map (d: d.name) p.cudaPackages_13_0.cudnn.stubArgs.buildInputs;
        fhs = p.cudaPackages_13_0.cudnn.stubArgs.allowFHSReferences;
      }}
    """)
    assert "cuda13-archive" in got["13.0"] and "cuda12-archive" in got["12.9"]
    assert got["deps"][2:] == ["cuda13.0-libcublas-13.1.0.3", "cuda13.0-cuda_nvrtc-13.0.88"] and got["fhs"] is True


def test_jetson_builds_use_the_linux_aarch64_archives():
    got = nix_eval(f"""
      let p = {pkgs(config=cuda('cudaCapabilities = [ "8.7" ];'), system="aarch64-linux")}; in {{
        redist = {{ "12.9" = p.cudaPackages_12_9.nixcudaRelease.redistSystem; "13.0" = p.cudaPackages_13_0.nixcudaRelease.redistSystem; }};
        # NVIDIA ships a linux-aarch64 archive, but no output list was made for it: nixpkgs' stays.
        cudartIsOurs = p.cudaPackages_12_9.cuda_cudart.stubArgs ? splitRedistStrict;
      }}
    """)
    assert got == {"redist": {"12.9": "linux-aarch64", "13.0": "linux-sbsa"}, "cudartIsOurs": False}


def test_cuda_13_layout_matches_what_nixpkgs_nvcc_expects():
    """nixpkgs' cuda_nvcc 13 points nvcc at cuda_cccl's include output and
    cuda_cudart propagates the compiler's headers: ours un-nests CCCL and
    offers its headers as `include`; cudart propagates crt (13) or nvcc (12.9)."""
    got = nix_eval(f"""
      let p = {pkgs(config=cuda())}; s13 = p.cudaPackages_13_0; s12 = p.cudaPackages_12_9; in {{
        cccl = s13.cuda_cccl.stubArgs.prePatch;
        cccl12 = s12.cuda_cccl.stubArgs.prePatch or "";
        include = s13.cuda_cccl.include.outPath;
        dev = s13.cuda_cccl.dev.outPath;
        nvcc = s13.cuda_nvcc.stubArgs.postInstall;
        cudart13 = map (d: d.name) s13.cuda_cudart.stubArgs.propagatedBuildInputs;
        cudart12 = map (d: d.name) s12.cuda_cudart.stubArgs.propagatedBuildInputs;
        cudartOutput = map (d: d.outputName) s13.cuda_cudart.stubArgs.propagatedBuildInputs;
      }}
    """)
    assert "mv include/cccl/* include/" in got["cccl"] and got["cccl12"] == ""
    assert got["include"] == got["dev"] and f"{got['dev']}/include" in got["nvcc"]
    assert got["cudart13"] == ["cuda13.0-cuda_crt-13.0.88", "cuda13.0-cuda_cccl-13.0.85"]
    assert got["cudart12"] == ["cuda12.9-cuda_nvcc-12.9.86", "cuda12.9-cuda_cccl-12.9.27"]
    assert got["cudartOutput"] == ["out", "dev"]


def test_a_member_without_an_output_list_is_broken_and_says_why():
    """meta.broken carries its reason, printed when the package is evaluated,
    as cuda-modules' buildRedist does with its brokenAssertions."""
    p = nix_eval(f"({pkgs(config=cuda())}.cudaPackages_13_0.libcublas.override {{ outputs = null; }}).meta.broken",
                 check=False)
    assert p.returncode == 0 and p.stdout.strip() == "true", p.stderr
    assert "cuda13.0-libcublas-13.1.0.3 is marked broken: an output list exists for libcublas" in p.stderr
    p = nix_eval(f"{pkgs(config=cuda())}.cudaPackages_13_0.libcublas.meta.broken", check=False)
    assert p.stdout.strip() == "false" and "marked broken" not in p.stderr


def test_default_applies_each_overlay_once(tmp_path):
    """overlays.default composes each file once: in a copy whose files trace
    each application, forcing the package set shows one trace a file."""
    for d in ("overlays", "lib", "pkgs", "hooks"):
        shutil.copytree(ROOT / d, tmp_path / d)
    for f in (tmp_path / "overlays").glob("*.nix"):
        if f.name != "default.nix":
            f.write_text(f'final: prev: builtins.trace "applied {f.stem}" ((\n{f.read_text()}\n) final prev)\n')
    p = subprocess.run(["nix-instantiate", "--eval", "-E",
                        f"({pkgs(overlays=f'[ (import {tmp_path}/overlays).default ]', config=cuda())})"
                        ".nixcuda.cudaSupport"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    applied = sorted(line.split("applied ")[1] for line in p.stderr.splitlines() if "applied " in line)
    assert applied == ["cuda-packages", "hooks", "options", "python-packages", "tools"]


def test_hooks_overlay_and_the_driver_runpath_opt_in():
    got = nix_eval(f"""
      let
        hooks = {pkgs(overlays='[ (import ./overlays).hooks ]')};
        default = {pkgs(overlays='[ (import ./overlays).default ]', config=cuda())};
        optIn = {pkgs(overlays='[ (import ./overlays).default (import ./overlays).driver-runpath ]', config=cuda())};
        prev = {pkgs(overlays='[ ]', config=cuda())};
        hookOf = d: map (x: x.name) d.stubArgs.nativeBuildInputs;
      in {{
        a = {{ inherit (hooks.autoAddOpenGLRunpathHook) stubKind; inherit (hooks.autoAddOpenGLRunpathHook.stubArgs) name;
              script = toString hooks.autoAddOpenGLRunpathHook.stubArgs.script;
              props = map (x: x.name) hooks.autoAddOpenGLRunpathHook.stubArgs.propagatedBuildInputs;
              inherit (hooks.autoAddOpenGLRunpathHook.stubArgs) substitutions; }};
        split = toString hooks.splitRedistOutputsHook.stubArgs.script;
        splitRules = hooks.splitRedistOutputsHook.stubArgs.substitutions;
        default = default.autoAddDriverRunpath.name;
        optIn = optIn.autoAddDriverRunpath.name;
        # nixpkgs' own members: untouched by default, rebuilt with the opt-in.
        gdbDefault = hookOf default.cudaPackages_12_9.cuda_gdb;
        gdbOptIn = hookOf optIn.cudaPackages_12_9.cuda_gdb;
        sameDefault = default.cudaPackages_12_9.cuda_gdb.drvPath == prev.cudaPackages_12_9.cuda_gdb.drvPath;
        sameOptIn = optIn.cudaPackages_12_9.cuda_gdb.drvPath == prev.cudaPackages_12_9.cuda_gdb.drvPath;
      }}
    """)
    assert got["a"] == {"stubKind": "makeSetupHook", "name": "auto-add-opengl-runpath-hook",
                        "script": str(ROOT / "hooks/auto-add-opengl-runpath-hook.sh"), "props": ["patchelf"],
                        # nixpkgs' addDriverRunpath.driverLink, not a path written by hand.
                        "substitutions": {"driverLink": "/run/opengl-driver"}}
    assert got["split"] == str(ROOT / "hooks/split-redist-outputs.sh")
    # The split rules, as redist-features reads them: the one copy.
    assert got["splitRules"] == {"redistSplitRules": (ROOT / "lib/data/redist-split-rules.txt").read_text()}
    assert got["default"] == "auto-add-driver-runpath-hook" and got["optIn"] == "auto-add-opengl-runpath-hook"
    assert "auto-add-driver-runpath-hook" in got["gdbDefault"] and "auto-add-opengl-runpath-hook" in got["gdbOptIn"]
    assert got["sameDefault"] is True and got["sameOptIn"] is False


def test_nixpkgs_packages_of_the_scope_link_against_ours():
    got = nix_eval(f"""
      let p = {pkgs(config=cuda())}; in {{
        nccl = map (x: x.name) p.cudaPackages_13_0.nccl.stubArgs.buildInputs;
        toolkit = map (x: x.name) p.cudaPackages_13_0.cudatoolkit.stubArgs.paths;
        backendStdenv = p.cudaPackages_13_0 ? backendStdenv;
      }}
    """)
    assert "cuda13.0-cuda_cudart-13.0.96" in got["nccl"] and got["backendStdenv"]
    # cudatoolkit joins nixpkgs' tools and our split libraries, every output but static.
    assert "cuda13.0-libcublas-13.1.0.3" in got["toolkit"] and "cuda13.0-cuda_gdb-13.0.85" in got["toolkit"]
