"""The overlay and the flake against the nixpkgs contract stub
(tests/contract/nixpkgs-contract-stub): what they ask of nixpkgs, what they
pass down, which derivations they create with which outputs and inputs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from cudagen import Nvcc, find_nvcc, gencode
from parts import needs, require

pytestmark = needs("nix-instantiate (Debian's nix-bin)", shutil.which("nix-instantiate") is not None)

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


@pytest.mark.parametrize("name", ["options", "tools", "hooks", "cuda-packages"])
def test_each_overlay_works_alone(name):
    # What the overlay itself defines, applied to the stub's nixpkgs.
    got = nix_eval(f"let ov = (import ./overlays).{name}; final = {pkgs(overlays='[ ov ]')}; "
                   f"prev = {pkgs(overlays='[ ]')}; in builtins.attrNames (ov final prev)")
    brings = {"options": {"nixcuda"}, "tools": {"closure-audit"},
              "hooks": {"autoAddOpenGLRunpathHook", "autoAddDriverRunpath", "splitRedistOutputsHook"},
              "cuda-packages": {"nixcuda", "autoAddOpenGLRunpathHook", "autoAddDriverRunpath", "splitRedistOutputsHook",
                                "cudaPackages", "cudaPackages_12_9", "cudaPackages_13_0"}}
    ours = {"nixcuda", "closure-audit", "autoAddOpenGLRunpathHook", "autoAddDriverRunpath", "splitRedistOutputsHook",
            "cudaPackages", "cudaPackages_12_9", "cudaPackages_13_0"}
    assert set(got) & ours == brings[name]


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
    assert a["build"] == ["setuptools"] and a["deps"] == ["networkx", "rich"]
    assert a["makeWrapperArgs"] == ["--prefix", "PATH", ":", a["nix"] + "/bin"]
    assert a["checks"] == ["pytestCheckHook", "hypothesis", "jsonschema", "pyelftools", "patchelf"]
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
    assert f["checks"] == ["closure-audit", "lib", "torch-archs", "torch-closure"]
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


def _package_set_summary(system: str, config: str = "{ }") -> dict:
    return nix_eval(f"""
      let
        p = {pkgs(config=config, system=system)};
        # nixcuda's members: ours carry the release in their name.
        ours = d: builtins.isAttrs d && d ? stubArgs && d.stubArgs ? pname
          && builtins.substring 0 4 d.stubArgs.pname == "cuda" && d.stubArgs ? splitRedistStrict;
        summary = set: builtins.mapAttrs (name: d:
          if !(ours d) then null else
          let available = (builtins.tryEval (builtins.deepSeq d.stubArgs.src.stubArgs.url true)).success; in {{
            inherit (d) name outputs;
            platforms = d.meta.platforms;
            broken = d.meta.broken;
            available = available;
            url = if available then d.stubArgs.src.stubArgs.url else null;
            sha256 = if available then d.stubArgs.src.stubArgs.sha256 else null;
            hooks = map (x: x.name) d.stubArgs.nativeBuildInputs;
            deps = map (x: x.name) d.stubArgs.buildInputs;
            strict = d.stubArgs.splitRedistStrict;
          }}) set;
      in {{
        "12.9" = summary p.cudaPackages_12_9;
        "13.0" = summary p.cudaPackages_13_0;
        same = p.cudaPackages.cudaMajorMinorVersion == "13.0" && p.cudaPackages.libcublas.name == p.cudaPackages_13_0.libcublas.name;
        toolchain = {{ "12.9" = map (n: p.cudaPackages_12_9.${{n}}.name) [ "cuda_nvcc" "cuda_crt" "libnvvm" ];
                      "13.0" = map (n: p.cudaPackages_13_0.${{n}}.name) [ "cuda_nvcc" "cuda_crt" "libnvvm" ]; }};
        ncclInputs = map (x: x.name) p.cudaPackages_13_0.nccl.stubArgs.buildInputs;
        backendStdenv = p.cudaPackages_13_0 ? backendStdenv;
        redistSystem = {{ "12.9" = p.cudaPackages_12_9.redistSystem; "13.0" = p.cudaPackages_13_0.redistSystem; }};
      }}
    """)


RELEASES = {"12.9": ("12.9.1", "cuda12"), "13.0": ("13.0.2", "cuda13")}
PLATFORM = {"x86_64-linux": "linux-x86_64", "aarch64-linux": "linux-sbsa"}


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_cuda_package_sets(system):
    got = _package_set_summary(system)
    assert got["same"] and got["redistSystem"] == {"12.9": PLATFORM[system], "13.0": PLATFORM[system]}
    platform = PLATFORM[system]
    for version, (release, variant) in RELEASES.items():
        cuda = json.loads((ROOT / f"pkgs/cuda/manifests/redistrib_{release}.json").read_text())
        cudnn = json.loads((ROOT / "pkgs/cuda/manifests/redistrib_9.27.0.json").read_text())
        outputs = json.loads((ROOT / f"pkgs/cuda/outputs/{release}.json").read_text())["packages"]
        outputs.update(json.loads((ROOT / f"pkgs/cuda/outputs/cudnn-9.27.0-{variant}.json").read_text())["packages"])
        members = {k: v for k, v in got[version].items() if v is not None}
        expected_names = {k for k, v in {**cuda, **cudnn}.items() if isinstance(v, dict) and "version" in v}
        # Every package of the manifests evaluates; the compiler's parts stay
        # nixpkgs' (its setup hooks), when nixpkgs has the release.
        toolchain = {"cuda_nvcc", "cuda_crt", "libnvvm"}
        assert set(members) == expected_names - toolchain
        assert not any(n.startswith(f"cuda{version}-") for n in got["toolchain"][version])
        for name, d in members.items():
            manifest = cuda if name in cuda else cudnn
            entry = manifest[name]
            assert d["name"] == f"cuda{version}-{name}-{entry['version']}"  # the set in the store name
            archive = entry.get(platform)
            if archive is not None and name in cudnn:
                archive = archive.get(variant)
            listed = outputs.get(name, {}).get(platform)
            if archive is None:
                assert not d["available"] and system not in d["platforms"], name  # unsupported here
                continue
            assert system in d["platforms"], name
            product = "cuda" if name in cuda else "cudnn"
            assert d["available"] and d["url"] == (
                f"https://developer.download.nvidia.com/compute/{product}/redist/{archive['relative_path']}")
            assert d["sha256"] == archive["sha256"], name
            assert d["hooks"] == ["autoPatchelfHook", "auto-add-opengl-runpath-hook", "split-redist-outputs-hook"]
            if listed is None:
                assert d["broken"] and d["outputs"] == ["out"], name
            else:
                assert not d["broken"] and d["outputs"] == ["out", *listed["outputs"]], name
                assert d["strict"] is listed["inspected"].startswith("tarball")
            # A member of one set never pulls in a member of another.
            for dep in d["deps"]:
                if dep.startswith("cuda") and dep[4:8].rstrip("-").replace(".", "").isdigit():
                    assert dep.startswith(f"cuda{version}-"), (name, dep)


def test_nixpkgs_packages_of_the_scope_link_against_ours():
    got = _package_set_summary("x86_64-linux")
    assert "cuda13.0-cuda_cudart-13.0.96" in got["ncclInputs"] and got["backendStdenv"]


def test_cudnn_takes_the_matching_cuda_variant():
    got = _package_set_summary("x86_64-linux")
    assert "cuda13-archive" in got["13.0"]["cudnn"]["url"] and "cuda12-archive" in got["12.9"]["cudnn"]["url"]
    assert got["13.0"]["cudnn"]["deps"][2:] == ["cuda13.0-libcublas-13.1.0.3", "cuda13.0-cuda_nvrtc-13.0.88"]


def test_jetson_builds_use_the_linux_aarch64_archives():
    got = _package_set_summary("aarch64-linux", '{ cudaCapabilities = [ "8.7" ]; }')
    assert got["redistSystem"] == {"12.9": "linux-aarch64", "13.0": "linux-sbsa"}
    cudart = got["12.9"]["cuda_cudart"]
    # NVIDIA ships a linux-aarch64 archive, but no output list was made for it here.
    assert cudart["available"] and cudart["broken"] and cudart["outputs"] == ["out"]


def test_hooks_overlay():
    got = nix_eval(f"""
      let p = {pkgs(overlays='[ (import ./overlays).hooks ]')}; in {{
        a = {{ inherit (p.autoAddOpenGLRunpathHook) stubKind; inherit (p.autoAddOpenGLRunpathHook.stubArgs) name;
              script = toString p.autoAddOpenGLRunpathHook.stubArgs.script;
              props = map (x: x.name) p.autoAddOpenGLRunpathHook.stubArgs.propagatedBuildInputs; }};
        alias = p.autoAddDriverRunpath.name == p.autoAddOpenGLRunpathHook.name;
        split = toString p.splitRedistOutputsHook.stubArgs.script;
      }}
    """)
    assert got["a"] == {"stubKind": "makeSetupHook", "name": "auto-add-opengl-runpath-hook",
                        "script": str(ROOT / "hooks/auto-add-opengl-runpath-hook.sh"), "props": ["patchelf"]}
    assert got["alias"] and got["split"] == str(ROOT / "hooks/split-redist-outputs.sh")


def test_cuda_packages_overlay_works_alone():
    got = nix_eval(f"({pkgs(overlays='[ (import ./overlays).cuda-packages ]')}).cudaPackages.libcublas.outputs")
    assert got == ["out", "lib", "dev"]


def test_cuda_package_sets_stand_alone_without_a_nixpkgs_scope():
    """On a nixpkgs without these releases, every redistributable is nixcuda's."""
    got = nix_eval(f"""
      let p = {pkgs(overlays='[ (final: prev: { cudaPackages_12_9 = null; cudaPackages_13_0 = null; }) (import ./overlays).default ]')};
      in {{ nvcc = p.cudaPackages.cuda_nvcc.name; outs = p.cudaPackages.cuda_nvcc.outputs; scoped = p.cudaPackages ? overrideScope; }}
    """)
    assert got == {"nvcc": "cuda13.0-cuda_nvcc-13.0.88", "outs": ["out", "bin", "dev"], "scoped": False}


def _torch(config: str, system: str = "x86_64-linux", override: str = "") -> dict:
    return nix_eval(f"""
      let
        p = {pkgs(config=config, system=system)};
        t = p.python3Packages.torch{override};
        names = map (x: x.name);
      in {{
        inherit (t) name cudaArchList cudaCapabilities droppedCudaCapabilities withMagma;
        preConfigure = t.stubArgs.preConfigure;
        postPatch = t.stubArgs.postPatch;
        buildInputs = names t.stubArgs.buildInputs;
        nativeBuildInputs = names t.stubArgs.nativeBuildInputs;
        disallowed = names t.stubArgs.disallowedRequisites;
        extraRunpaths = t.stubArgs.extraRunpaths;
        outputs = t.outputs;
        cudaSupport = t.stubArgs.passthru.cudaSupport;
        gpu = {{ inherit (t.gpuCheck.stubArgs) requiredSystemFeatures buildCommand; inputs = names t.gpuCheck.stubArgs.nativeBuildInputs; }};
        archs = {{ inherit (t.tests.archs.stubArgs) buildCommand capabilities forwardCompat;
                  torch = t.tests.archs.stubArgs.torch.name; inputs = names t.tests.archs.stubArgs.nativeBuildInputs; }};
        closure = {{ inherit (t.tests.closure.stubArgs) buildCommand; budgets = toString t.tests.closure.stubArgs.budgets;
                    inputs = names t.tests.closure.stubArgs.nativeBuildInputs;
                    roots = map (r: r.name) t.tests.closure.stubArgs.closure.stubArgs.rootPaths; }};
        patch = t.cppExtensionPatch;
      }}
    """)


FORBIDDEN_IN_INPUTS = ("cuda-merged", "cudatoolkit", "magma-2", "cuda_nvcc")


@pytest.mark.parametrize("config, arch, caps", [
    ('{ cudaSupport = true; cudaCapabilities = [ "8.9" ]; cudaForwardCompat = false; }', "8.9", ["8.9"]),
    ('{ cudaSupport = true; cudaCapabilities = [ "9.0" "8.6" ]; }', "8.6;9.0+PTX", ["8.6", "9.0"]),
    ('{ cudaSupport = true; cudaCapabilities = [ "9.0" "8.6" ]; cudaForwardCompat = false; }', "8.6;9.0", ["8.6", "9.0"]),
    ('{ cudaSupport = true; cudaCapabilities = [ "8.6" "9.0a" ]; }', "8.6;9.0a;9.0+PTX", ["8.6", "9.0a"]),
])
def test_torch_arch_list(config, arch, caps):
    t = _torch(config)
    assert t["cudaArchList"] == arch and t["cudaCapabilities"] == caps
    # The build-time GPU code check asks for the same capabilities.
    assert t["archs"]["capabilities"] == ",".join(caps) and t["archs"]["torch"] == t["name"]
    assert t["archs"]["forwardCompat"] == ("--forward-compat" if "PTX" in arch else "--no-forward-compat")
    # The overlay's export comes last in preConfigure, so it is the one in effect.
    assert t["preConfigure"].rstrip().splitlines()[-1] == f'export TORCH_CUDA_ARCH_LIST="{arch}"'


def test_torch_drops_what_the_release_cannot_build_and_says_so():
    p = nix_eval(f'({pkgs(config=chr(123) + " cudaSupport = true; cudaCapabilities = [ " + chr(34) + "8.6" + chr(34) + " " + chr(34) + "10.0f" + chr(34) + " ]; " + chr(125))}).python3Packages.torch.cudaArchList',
                 check=False)
    assert p.returncode == 0 and json.loads(p.stdout) == "8.6+PTX"
    assert "PyTorch 2.9.1 cannot build for 10.0f; building for 8.6" in p.stderr


def test_torch_fails_evaluation_when_nothing_is_left():
    cfg = '{ cudaSupport = true; cudaCapabilities = [ "10.0f" "12.0f" ]; }'
    p = nix_eval(f"({pkgs(config=cfg)}).python3Packages.torch.cudaArchList", check=False)
    assert p.returncode != 0
    assert "PyTorch 2.9.1 builds for none of the requested CUDA capabilities (10.0f, 12.0f); it builds for" in p.stderr


def test_torch_runtime_inputs_hold_neither_toolkit_nor_magma():
    t = _torch("{ cudaSupport = true; }")
    assert t["cudaSupport"] is True and t["withMagma"] is True
    # Every CUDA library is nixcuda's split redistributable.
    cuda_libs = [n for n in t["buildInputs"] if "cuda" in n or n.startswith(("lib", "cudnn"))]
    assert {"cuda13.0-cuda_cudart-13.0.96", "cuda13.0-libcublas-13.1.0.3", "cuda13.0-cudnn-9.27.0.42"} <= set(cuda_libs)
    assert not any(n.startswith(FORBIDDEN_IN_INPUTS) for n in t["buildInputs"])
    assert "magma-cuda-static-2.9.0" in t["buildInputs"]  # linked statically
    assert "cuda_nvcc-13.0.0" in t["nativeBuildInputs"]  # the compiler runs at build time only
    assert set(t["disallowed"]) == {"cuda-merged-13.0", "cuda_nvcc-13.0.0", "gcc-wrapper", "gcc-wrapper-14.3.0",
                                    "magma-2.9.0"}
    no_magma = _torch("{ cudaSupport = true; }", override=".override { withMagma = false; }")
    assert no_magma["withMagma"] is False and not any("magma" in n for n in no_magma["buildInputs"])


def test_torch_hooks_and_runpaths():
    t = _torch("{ cudaSupport = true; }")
    assert "auto-add-opengl-runpath-hook" in t["nativeBuildInputs"]
    assert "auto-add-driver-runpath-hook" not in t["nativeBuildInputs"]
    libs = {p.split("-", 1)[1].rsplit("/lib", 1)[0] for p in t["extraRunpaths"]}
    assert {"cuda13.0-cuda_nvrtc-13.0.88-lib", "cuda13.0-libnvjitlink-13.0.88-lib", "cuda13.0-cudnn-9.27.0.42-lib",
            "cuda13.0-libcublas-13.1.0.3-lib"} <= libs
    assert all(p.endswith("-lib/lib") for p in t["extraRunpaths"])  # lib outputs only


def test_torch_cpp_extension_patch_and_checks():
    t = _torch("{ cudaSupport = true; }")
    patch = t["patch"]
    assert f"--replace-fail '{patch['from']}' '{patch['to']}'" in t["postPatch"]
    assert t["gpu"]["requiredSystemFeatures"] == ["cuda"] and "gpu-check.py" in t["gpu"]["buildCommand"]
    assert t["gpu"]["inputs"] == ["python3-env"]
    c = t["closure"]
    assert c["budgets"] == str(ROOT / "ci/closure-budgets.toml") and c["roots"] == [t["name"]]
    assert "closure-audit gate --budgets $budgets --path-info torch=$closure/registration" in c["buildCommand"]
    assert c["inputs"][0].startswith("closure-audit")


def test_flake_checks_hold_the_torch_closure_gate_and_archs_check():
    f = nix_eval(f"let f = {FLAKE}; in builtins.attrNames f.checks.x86_64-linux")
    assert {"torch-closure", "torch-archs"} <= set(f)


def test_hydra_jobs_match_the_workflow():
    jobs = nix_eval(f"""let f = {FLAKE}; in {{
      names = builtins.attrNames f.hydraJobs;
      checks = builtins.attrNames f.hydraJobs.checks.x86_64-linux;
      torch = f.hydraJobs.torch.x86_64-linux.name;
      gpu = f.hydraJobs.torch-gpu.aarch64-linux.stubArgs.requiredSystemFeatures;
    }}""")
    assert jobs == {"names": ["checks", "torch", "torch-gpu"], "checks": ["closure-audit", "lib", "torch-archs", "torch-closure"],
                    "torch": "torch-2.9.1", "gpu": ["cuda"]}
    spec = json.loads((ROOT / "ci/hydra/spec.json").read_text())
    assert spec["nixexprpath"] == "ci/hydra/jobsets.nix" and spec["nixexprinput"] in spec["inputs"]
    workflow = (ROOT / ".github/workflows/nixcuda.yml").read_text()
    for step in ("ci/test", "nix build .#python3Packages.torch", "gate --budgets ci/closure-budgets.toml",
                 "--baseline torch=baseline/gate.json", "--markdown gate.md", "gh pr comment"):
        assert step in workflow, step


@needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", find_nvcc() is not None)
@pytest.mark.parametrize("capabilities, forward, status", [
    ("8.6,9.0", "--forward-compat", 0),
    ("8.6", "--no-forward-compat", 0),  # sm_90 and compute_90 are unused: warnings
    ("8.0,8.6", "--no-forward-compat", 1),  # nothing runs on 8.0
])
def test_torch_archs_check_runs_its_script(tmp_path, capabilities, forward, status):
    """The archs check's build script, run for real on real GPU code as the
    builder would run it: the report is kept, the exit status is archs'."""
    t = _torch("{ cudaSupport = true; }")
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    Nvcc(find_nvcc(), tmp_path).build("torch/lib/libtorch_cuda.so", gencode("86:sm_86", "90:[sm_90,compute_90]"))
    out = tmp_path / "out"
    env = {**os.environ, "out": str(out), "torch": str(tmp_path / "torch"), "capabilities": capabilities,
           "forwardCompat": forward, "PATH": f"{ROOT / '.venv/bin'}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", t["archs"]["buildCommand"]], env=env,
                       capture_output=True, text=True)
    assert p.returncode == status, p.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["request"]["capabilities"] == capabilities.split(",")
    assert "libtorch_cuda.so" in (out / "report.txt").read_text()
