"""PyTorch (pkgs/torch) against the nixpkgs contract stub, whose torch follows
nixpkgs' PyTorch 2.9.1: which CUDA set and magma it gets, what nixpkgs refuses
and how that is said, the aliases, the architecture list, runpaths and checks."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from contract_eval import FLAKE, cuda, error_line, needs_nix_instantiate, nix_eval, pkgs

pytestmark = needs_nix_instantiate


def _torch(config: str, system: str = "x86_64-linux", override: str = "", extra: str = "") -> dict:
    return nix_eval(f"""
      let
        p = {pkgs(config=config, system=system, extra=extra)};
        t = p.python3Packages.torch{override};
        names = map (x: x.name);
      in {{
        inherit (t) name cudaArchList cudaCapabilities droppedCudaCapabilities withMagma;
        drvPath = t.drvPath;
        set = t.cudaPackages.cudaMajorMinorVersion;
        preConfigure = t.stubArgs.preConfigure;
        postPatch = t.stubArgs.postPatch;
        buildInputs = names t.stubArgs.buildInputs;
        nativeBuildInputs = names t.stubArgs.nativeBuildInputs;
        checks = builtins.filter (n: t.stubArgs ? ${{n}}) [ "disallowedRequisites" "disallowedReferences" "outputChecks" ];
        extraRunpaths = t.stubArgs.extraRunpaths;
        outputs = t.outputs;
        cudaSupport = t.stubArgs.passthru.cudaSupport;
        policy = t.closurePolicy;
        gpu = {{ inherit (t.gpuCheck.stubArgs) requiredSystemFeatures buildCommand; inputs = names t.gpuCheck.stubArgs.nativeBuildInputs; }};
        archs = {{ inherit (t.tests.archs.stubArgs) buildCommand capabilities forwardCompat budgets;
                  torch = t.tests.archs.package.name; inputs = names t.tests.archs.stubArgs.nativeBuildInputs;
                  roots = map (r: r.outputName) t.tests.archs.stubArgs.closure.stubArgs.exportReferencesGraph.closure; }};
        closure = {{ inherit (t.tests.closure.stubArgs) buildCommand budgets capabilities;
                    inputs = names t.tests.closure.stubArgs.nativeBuildInputs;
                    roots = map (r: r.outputName) t.tests.closure.stubArgs.closure.stubArgs.exportReferencesGraph.closure; }};
        patch = t.cppExtensionPatch;
      }}
    """)


CUDA = cuda()


def test_torch_evaluates_on_cuda_12_9_with_magma_and_triton_of_the_same_set():
    got = nix_eval(f"""
      let p = {pkgs(config=CUDA)}; t = p.python3Packages.torch;
          magma = builtins.head (builtins.filter (d: (d.pname or "") == "magma") t.stubArgs.buildInputs);
          triton = builtins.head (builtins.filter (d: (d.pname or "") == "triton") t.stubArgs.buildInputs);
      in {{
        drv = builtins.isString t.drvPath;
        set = t.cudaPackages.cudaMajorMinorVersion;
        magma = magma.cudaPackages.cudaMajorMinorVersion;
        magmaStatic = magma.meta.broken;
        triton = triton.cudaPackages.cudaMajorMinorVersion;
        tritonPtxas = triton.stubArgs.env.TRITON_PTXAS_PATH;
      }}
    """)
    assert got["drv"] and got["set"] == got["magma"] == got["triton"] == "12.9" and got["magmaStatic"] is False
    assert "-cuda12.9-cuda_nvcc-" in got["tritonPtxas"]


@pytest.mark.parametrize("default", ["12.9", "13.0"])
def test_torch_does_not_follow_nixpkgs_default_cuda_set(default):
    """Whatever set nixpkgs makes its default, torch takes the one
    releases.json names, and magma-cuda-static is rebuilt with it."""
    t = _torch(CUDA, extra=f'defaultCudaVersion = "{default}";')
    assert t["set"] == "12.9" and t["drvPath"].endswith("-torch-2.9.1.drv")
    assert "magma-2.9.0" in t["buildInputs"]


def test_torch_with_cuda_and_without_cuda():
    got = nix_eval(f"""
      let
        p = {pkgs(config=CUDA)}; py = p.python3Packages;
        names = d: map (x: x.name) d.stubArgs.buildInputs;
      in {{
        withCuda = py.torchWithCuda.drvPath == py.torch.drvPath;
        withCudaSet = py.torchWithCuda.cudaPackages.cudaMajorMinorVersion;
        without = py.torchWithoutCuda.drvPath;
        withoutInputs = names py.torchWithoutCuda;
        withoutSupport = py.torchWithoutCuda.cudaSupport;
        # Without CUDA nixcuda changes nothing.
        configOff = ({pkgs()}).python3Packages.torch.drvPath == ({pkgs(overlays="[ ]")}).python3Packages.torch.drvPath;
      }}
    """)
    assert got["withCuda"] and got["withCudaSet"] == "12.9" and got["configOff"] and got["withoutSupport"] is False
    assert not any(n.startswith("cuda") for n in got["withoutInputs"])


def test_cuda_13_is_an_opt_in_that_nixpkgs_torch_refuses_with_a_clear_error():
    p = nix_eval(f"({pkgs(config=CUDA)}).python3Packages.torch.override {{ cudaPackages = ({pkgs(config=CUDA)}).cudaPackages_13_0; }}",
                 check=False, strict=False)
    line = error_line(p.stderr)
    assert p.returncode != 0
    assert "nixcuda: nixpkgs' PyTorch 2.9.1 refuses CUDA 13.0 (Unsupported CUDA version)" in line
    assert "never sets meta.broken = false" in line and "cudaPackages_12_9" in line


def test_a_refusal_is_never_forced_through():
    """A magma of another CUDA set is refused by nixpkgs' torch: said, not hidden."""
    p = nix_eval(f"""
      let p = {pkgs(config=CUDA)}; in
      (p.python3Packages.torch.override {{
        effectiveMagma = p.magma-cuda-static.override {{ cudaPackages = p.cudaPackages_13_0; }}; }}).drvPath
    """, check=False)
    assert p.returncode != 0 and "Magma cudaPackages does not match cudaPackages" in error_line(p.stderr)


@pytest.mark.parametrize("config, arch, caps", [
    (cuda('cudaCapabilities = [ "8.9" ]; cudaForwardCompat = false;'), "8.9", ["8.9"]),
    (cuda('cudaCapabilities = [ "9.0" "8.6" ];'), "8.6;9.0+PTX", ["8.6", "9.0"]),
    (cuda('cudaCapabilities = [ "9.0" "8.6" ]; cudaForwardCompat = false;'), "8.6;9.0", ["8.6", "9.0"]),
    (cuda('cudaCapabilities = [ "8.6" "9.0a" ];'), "8.6;9.0a;9.0+PTX", ["8.6", "9.0a"]),
])
def test_torch_arch_list(config, arch, caps):
    t = _torch(config)
    assert t["cudaArchList"] == arch and t["cudaCapabilities"] == caps
    # The build-time GPU code check asks for the same capabilities.
    assert t["archs"]["capabilities"] == ",".join(caps) and t["archs"]["torch"] == t["name"]
    assert t["archs"]["forwardCompat"] == ("yes" if "PTX" in arch else "no")
    assert t["archs"]["roots"] == ["out", "lib"] and t["archs"]["budgets"] == t["closure"]["budgets"]
    # The overlay's export comes last in preConfigure, so it is the one in effect.
    assert t["preConfigure"].rstrip().splitlines()[-1] == f'export TORCH_CUDA_ARCH_LIST="{arch}"'


def test_torch_2_9_builds_for_10_3_and_12_1():
    """capabilities.json has 2.9's own list: 10.3 and 12.1 are not dropped
    (2.7's list, the fallback before, lacked them)."""
    t = _torch(cuda('cudaCapabilities = [ "10.3" "12.1" ];'))
    assert t["cudaCapabilities"] == ["10.3", "12.1"] and t["droppedCudaCapabilities"] == []


def test_torch_drops_what_the_release_cannot_build_and_says_so():
    cfg = cuda('cudaCapabilities = [ "8.6" "10.0f" ];')
    p = nix_eval(f"({pkgs(config=cfg)}).python3Packages.torch.cudaArchList", check=False)
    assert p.returncode == 0 and json.loads(p.stdout) == "8.6+PTX"
    assert "PyTorch 2.9.1 cannot build for 10.0f; building for 8.6" in p.stderr


def test_torch_fails_evaluation_when_nothing_is_left():
    cfg = cuda('cudaCapabilities = [ "10.0f" "12.0f" ];')
    p = nix_eval(f"({pkgs(config=cfg)}).python3Packages.torch.drvPath", check=False)
    assert p.returncode != 0
    assert "PyTorch 2.9.1 builds for none of the requested CUDA capabilities (10.0f, 12.0f); it builds for" in \
        error_line(p.stderr)


def test_torch_inputs():
    t = _torch(CUDA)
    assert t["cudaSupport"] is True and t["withMagma"] is True
    # Every CUDA library is nixcuda's split redistributable of the 12.9 set.
    for name in ("cuda12.9-cuda_cudart-12.9.79", "cuda12.9-libcublas-12.9.1.4", "cuda12.9-cudnn-9.27.0.42"):
        assert name in t["buildInputs"], name
    # nixpkgs' compiler, whose headers (crt) CUDA 12.9 keeps, is a build input as
    # in nixpkgs; no cuda_crt (12.9 has none).
    assert "cuda12.9-cuda_nvcc-12.9.86" in t["buildInputs"] and "cuda12.9-cuda_nvcc-12.9.86" in t["nativeBuildInputs"]
    assert not any("cuda_crt" in n for n in t["buildInputs"])
    assert "magma-2.9.0" in t["buildInputs"]  # magma-cuda-static, linked statically
    no_magma = _torch(CUDA, override=".override { withMagma = false; }")
    assert no_magma["withMagma"] is False and not any("magma" in n for n in no_magma["buildInputs"])


def test_output_checks_cover_the_runtime_outputs_from_the_budgets_file():
    t = _torch(CUDA)
    # No Nix-level check on every output: dev and cxxdev hold the compiler by design.
    assert t["checks"] == []
    assert t["closure"]["roots"] == ["out", "lib"] and t["closure"]["capabilities"] == ""
    import tomllib

    budgets = tomllib.loads((ROOT / "ci/closure-budgets.toml").read_text())
    assert t["policy"] == budgets["targets"]["torch"]
    # The check's budgets: the file's defaults, and its torch target less
    # where CI finds the closure.
    written = tomllib.loads(t["closure"]["budgets"])
    torch = {k: v for k, v in budgets["targets"]["torch"].items() if k != "installable"}
    assert written == {"schema": "closure-audit-budgets/1", "defaults": budgets["defaults"], "targets": {"closure": torch}}


def test_the_exceptions_are_documented_with_their_reasons():
    import tomllib

    allow = tomllib.loads((ROOT / "ci/closure-budgets.toml").read_text())["targets"]["torch"]["allow"]
    doc = (ROOT / "docs/nix/torch.md").read_text()
    table = doc.split("| allowed | why |", 1)[1].split("\n\n", 1)[0]
    documented = [row.split("|")[1].strip().strip("`") for row in table.strip().splitlines()[1:]]
    assert documented == allow and all(len(row.split("|")[2].strip()) > 20 for row in table.strip().splitlines()[1:])


def test_torch_hooks_and_runpaths():
    t = _torch(CUDA)
    assert "auto-add-opengl-runpath-hook" in t["nativeBuildInputs"]
    assert "auto-add-driver-runpath-hook" not in t["nativeBuildInputs"]
    libs = {p.split("-", 1)[1].rsplit("/lib", 1)[0] for p in t["extraRunpaths"]}
    assert {"cuda12.9-cuda_nvrtc-12.9.86-lib", "cuda12.9-libnvjitlink-12.9.86-lib", "cuda12.9-cudnn-9.27.0.42-lib",
            "cuda12.9-libcublas-12.9.1.4-lib"} <= libs
    assert all(p.endswith("-lib/lib") for p in t["extraRunpaths"])  # lib outputs only


def test_torch_cpp_extension_patch_and_checks():
    t = _torch(CUDA)
    patch = t["patch"]
    assert f"--replace-fail '{patch['from']}' '{patch['to']}'" in t["postPatch"]
    assert t["gpu"]["requiredSystemFeatures"] == ["cuda"] and "gpu-check.py" in t["gpu"]["buildCommand"]
    assert t["gpu"]["inputs"] == ["python3-env"]
    c = t["closure"]
    assert '--registration "$closure/registration"' in c["buildCommand"]
    assert c["inputs"][0].startswith("closure-audit")


def test_capabilities_table_covers_every_release_from_2_7():
    table = json.loads((ROOT / "pkgs/torch/capabilities.json").read_text())
    releases = sorted((k for k in table if not k.startswith("_")), key=lambda v: tuple(map(int, v.split("."))))
    assert releases == [f"2.{m}" for m in range(7, 15)]
    for release in releases:
        entry = table[release]
        assert entry["source"].startswith(f"torch {release}.") and "cpp_extension.py" in entry["source"]
        assert "8.6" in entry["capabilities"] and len(set(entry["capabilities"])) == len(entry["capabilities"])
    # What changed between releases, as PyTorch's sources say.
    assert "10.3" not in table["2.7"]["capabilities"] and "10.3" in table["2.8"]["capabilities"]
    assert "10.1" in table["2.8"]["capabilities"] and "10.1" not in table["2.9"]["capabilities"]
    assert "11.0" in table["2.9"]["capabilities"] and "10.7" in table["2.14"]["capabilities"]


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
    jobs["checks"] = [n for n in jobs["checks"] if not n.startswith("cuda-checks.")]
    assert jobs == {"names": ["checks", "cuda-checks", "torch", "torch-gpu"],
                    "checks": ["closure-audit", "lib", "torch-archs", "torch-closure"],
                    "torch": "python3.13-torch-2.9.1", "gpu": ["cuda"]}
    spec = json.loads((ROOT / "ci/hydra/spec.json").read_text())
    assert spec["nixexprpath"] == "ci/hydra/jobsets.nix" and spec["nixexprinput"] in spec["inputs"]
    workflow = (ROOT / ".github/workflows/nixcuda.yml").read_text()
    for step in ("ci/test", "nix build .#python3Packages.torch", "gate --budgets ci/closure-budgets.toml",
                 "--baseline torch=baseline/gate.json", "--markdown gate.md", "gh pr comment",
                 "nix eval --raw .#python3Packages.torch.outPath", "--store \"https://", "--trusted-public-keys",
                 "tests/nix/test_nixpkgs_pin.py", "NIXPKGS="):
        assert step in workflow, step
