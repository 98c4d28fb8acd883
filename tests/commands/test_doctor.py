"""`closure-audit doctor` on fake hosts laid out under a temporary root
(NixOS, Ubuntu-like, WSL, Jetson), in text and JSON."""

from __future__ import annotations

import json
import os
import shutil

import pytest

import fakehost
from conftest import run_cli, validate
from cudagen import Nvcc, find_nvcc, gencode
from closure_audit.cuda.models import capability_of
from closure_audit.host.probe import probe
from closure_audit.host.root import Root
from parts import needs, require

pytestmark = pytest.mark.fhs
needs_nvcc = needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", find_nvcc() is not None)

PATH = "/fakebin:/usr/bin:/bin"


def doctor(root, *targets, json_out=True, env=None):
    args = ["doctor", "--host-root", str(root), *map(str, targets)] + (["--json"] if json_out else [])
    p = run_cli(*args, env={"PATH": PATH, **(env or {})})
    if not json_out:
        return p.returncode, p.stdout
    assert p.stdout, p.stderr
    data = json.loads(p.stdout)
    validate(data)
    return p.returncode, data


def checks(data) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in data["checks"]:
        out.setdefault(c["check"], []).append(c)
    return out


def store_target(build, monkeypatch, runpath=("/run/opengl-driver/lib",)):
    """A store path whose library opens libcuda.so.1 itself, as cuBLAS does."""
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    code = ('#include <dlfcn.h>\nstatic const char *n = "libcuda.so.1";\n'
            "void *open_driver(void) { return dlopen(n, RTLD_NOW); }\n")
    build.lib("store/0000000000000000000000000000cubl-libcublas-13.1/lib/libcublas.so.13", code=code,
              runpath=list(runpath) if runpath else None)
    return store / "0000000000000000000000000000cubl-libcublas-13.1"


# -- reading the host --------------------------------------------------------------

def test_root_resolves_absolute_links_inside_the_root(tmp_path):
    h = fakehost.nixos(tmp_path / "root")
    root = Root(str(h.root))
    real = root.resolve("/run/opengl-driver/lib/libcuda.so.1")
    assert real.startswith("/nix/store/") and real.endswith("-nvidia-x11-580.82.07-6.6.30/lib/libcuda.so.580.82.07")
    assert root.isfile("/run/opengl-driver/lib/libcuda.so.1") and not os.path.exists(real)


def test_ld_so_conf_is_read_as_ldconfig_reads_it(tmp_path):
    """The directories a root's ld.so.conf names, in ldconfig's own order
    (`ldconfig -r ROOT -v` lists those it indexes): includes relative and
    globbed in any component, `hwcap` lines, an old `=TYPE` suffix, trailing
    slashes, and a line of several names, which is one directory to ldconfig."""
    import re
    import subprocess

    ldconfig = shutil.which("ldconfig", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    require("ldconfig, as root (-r chroots)", bool(ldconfig) and os.geteuid() == 0)
    h = fakehost.FakeHost(tmp_path / "root")
    h.file("/etc/ld.so.conf", "include ld.so.conf.d/*.conf\n# a comment\nhwcap 0 nosegneg\n/opt/a/lib=libc6\n"
                              "/opt/c/lib///  \n/opt/a/lib /opt/b/lib:/opt/c/lib\n  /opt/e/lib\n"
                              "include /etc/ld.so.conf.e*/*.conf\n")
    h.file("/etc/ld.so.conf.d/d.conf", "/opt/d/lib\n")
    h.file("/etc/ld.so.conf.extra/x.conf", "/opt/b/lib\n")
    for d in "abcde":
        h.path(f"/opt/{d}/lib").mkdir(parents=True)
    p = subprocess.run([ldconfig, "-r", str(h.root), "-X", "-C", "/ld.so.cache", "-v"], capture_output=True, text=True)
    theirs = [m[1] for m in re.finditer(r"^(/\S*): \(from (?!<builtin>)", p.stdout, re.M)]
    root = Root(str(h.root))
    ours = [d for d in root.ld_so_conf() if root.isdir(d)]
    assert ours == theirs == ["/opt/d/lib", "/opt/a/lib", "/opt/c/lib", "/opt/e/lib", "/opt/b/lib"], p.stderr


@pytest.mark.parametrize("kind", ["nixos", "ubuntu", "wsl", "jetson"])
def test_probe_each_kind_of_host(tmp_path, kind, monkeypatch):
    monkeypatch.setenv("PATH", PATH)
    h = getattr(fakehost, kind)(tmp_path / "root")
    host = probe(str(h.root))
    expected = {
        "nixos": ("nixos", "/run/opengl-driver/lib/libcuda.so.1", "580.82.07", "file name", [("8.6", "nvidia-smi")]),
        "ubuntu": ("distro", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "580.82.07", "file name",
                   [("8.6", "nvidia-smi")]),
        "wsl": ("wsl", "/usr/lib/wsl/lib/libcuda.so.1", "560.94", "version string", [("8.9", "nvidia-smi")]),
        "jetson": ("jetson", "/usr/lib/aarch64-linux-gnu/nvidia/libcuda.so.1", "540.3.0", "version string",
                   [("8.7", "/proc/device-tree/compatible")]),
    }[kind]
    assert (host.kind, host.driver.path, host.driver.version, host.driver.version_source) == expected[:4]
    assert [(g.capability, g.source) for g in host.gpus] == expected[4]
    assert host.kernel_module == {"nixos": "580.82.07", "ubuntu": "580.82.07"}.get(kind)


def test_gpu_names_without_nvidia_smi():
    assert capability_of("Tesla T4") == "7.5"
    assert capability_of("NVIDIA GeForce GTX 1080 Ti") == "6.1"
    assert capability_of("NVIDIA H100 80GB HBM3") == "9.0"
    assert capability_of("NVIDIA A10G") == "8.6" and capability_of("NVIDIA A100-SXM4-80GB") == "8.0"
    assert capability_of("NVIDIA GeForce RTX 5090") == "12.0" and capability_of("Some Future GPU") is None


# -- verdicts --------------------------------------------------------------------

def test_nixos_host_with_a_hooked_store_path_is_fine(tmp_path, build, monkeypatch):
    h = fakehost.nixos(tmp_path / "root")
    rc, data = doctor(h.root, store_target(build, monkeypatch))
    assert rc == 0, data["checks"]
    c = checks(data)
    assert [x["status"] for x in data["checks"]] == ["ok"] * len(data["checks"])
    assert "/run/opengl-driver/lib" in c["driver-library"][0]["message"]
    assert data["host"]["kind"] == "nixos" and data["host"]["driver"]["version"] == "580.82.07"
    assert "CUDA 13.x (from SONAME libcublas.so.13" in c["cuda-runtime"][0]["message"]
    assert data["mode"] == "nix-store" and data["summary"]["error"] == 0


def test_kernel_module_and_library_mismatch(tmp_path):
    h = fakehost.nixos(tmp_path / "root", driver="550.54.14", kernel="550.40.07")
    rc, data = doctor(h.root)
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-kernel-mismatch"
    assert (f["user_version"], f["kernel_version"]) == ("550.54.14", "550.40.07")
    assert f["fixes"][0]["text"].startswith("reboot") and "switch back" in f["fixes"][1]["text"]
    rc, text = doctor(h.root, json_out=False)
    assert rc == 1 and "driver-kernel-mismatch" not in text and "kernel module 550.40.07" in text
    assert "fix 1: reboot" in text


def test_ubuntu_host_cannot_reach_the_driver_from_a_store_path(tmp_path, build, monkeypatch):
    h = fakehost.ubuntu(tmp_path / "root")
    rc, data = doctor(h.root, store_target(build, monkeypatch))
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-unreachable"
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in f["message"]
    fixes = [x["text"] for x in f["fixes"]]
    assert "nixglhost" in fixes[0] and "nixGL" in fixes[0]
    assert "ln -sf /usr/lib/x86_64-linux-gnu/libcuda.so*" in fixes[1] and "/run/opengl-driver/lib" in fixes[1]
    assert fixes[2] == "for one shell: export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu"
    assert all(x["trade_off"] for x in f["fixes"])
    # The host alone: fine for its own programs, a warning for Nix ones.
    rc, data = doctor(h.root)
    assert rc == 0 and data["summary"]["warning"] == 1
    assert [f["rule"] for f in data["findings"]] == ["no-driver-directory"]


def test_store_path_without_the_driver_directory_fails_everywhere(tmp_path, build, monkeypatch):
    h = fakehost.nixos(tmp_path / "root")
    rc, data = doctor(h.root, store_target(build, monkeypatch, runpath=None))
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-unreachable" and "missing-driver-runpath" in f["message"]
    assert "autoAddOpenGLRunpathHook" in f["fixes"][0]["text"]


def cuda13_tree(build):
    """A venv-like tree with the CUDA 13.0.96 runtime, as NVIDIA's wheel has it."""
    build.lib("site-packages/nvidia/cu13/lib/libcudart.so.13", soname="libcudart.so.13")
    (build.root / "site-packages/nvidia_cuda_runtime-13.0.96.dist-info").mkdir(parents=True)
    return build.root


def test_wsl_driver_too_old_for_cuda_13(tmp_path, build):
    h = fakehost.wsl(tmp_path / "root", driver="560.94")
    rc, data = doctor(h.root, cuda13_tree(build))
    assert rc == 1
    c = checks(data)
    assert c["kernel-module"][0]["status"] == "ok" and "WSL" in c["kernel-module"][0]["message"]
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-too-old" and (f["runtime"], f["needs"], f["driver"]) == ("13.0", "580.65.06", "560.94")
    assert f["fixes"][0]["text"] == "upgrade the NVIDIA driver to 580.65.06 or newer on Windows"
    assert f["fixes"][1]["text"].startswith("or install builds for CUDA 12.6 instead: the CUDA 12 wheels "
                                            "(nvidia-cuda-runtime-cu12 and the other nvidia-*-cu12 wheels)")
    assert "cuda-compat-13-0" in f["fixes"][2]["text"]
    assert not any("cudaPackages" in x["text"] or "cuda_compat" in x["text"] for x in f["fixes"])
    assert data["host"]["driver"]["version_source"] == "version string"


def test_driver_between_minor_compatibility_and_the_toolkit(tmp_path, build):
    h = fakehost.ubuntu(tmp_path / "root", driver="535.183.01")
    build.lib("lib/libcudart.so.12.4.127", soname="libcudart.so.12")
    rc, data = doctor(h.root, build.root)
    assert rc == 0
    (f,) = data["findings"]
    assert f["rule"] == "driver-minor-compat" and f["needs"] == "550.54.14" and f["severity"] == "warning"


def test_jetson_host(tmp_path):
    h = fakehost.jetson(tmp_path / "root")
    rc, data = doctor(h.root)
    c = checks(data)
    assert data["host"]["kind"] == "jetson" and "L4T R36.3.0" in c["host"][0]["message"]
    assert "Jetson Orin" in c["gpus"][0]["message"] and "8.7" in c["gpus"][0]["message"]
    assert c["kernel-module"][0]["status"] == "ok"
    assert rc == 0 and data["summary"]["error"] == 0


@pytest.fixture(scope="module")
def gpu_lib(tmp_path_factory):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("needs nvcc")
    return Nvcc(nvcc, tmp_path_factory.mktemp("nvcc")).build("libkernels.so", gencode("80:sm_80", "90:sm_90"))


@needs_nvcc
def test_a_gpu_older_than_every_compiled_architecture(tmp_path, build, gpu_lib):
    tree = cuda13_tree(build)
    (tree / "site-packages/torch/lib").mkdir(parents=True)
    (tree / "site-packages/torch/lib/libkernels.so").write_bytes(gpu_lib.read_bytes())
    h = fakehost.ubuntu(tmp_path / "root", gpus=[("NVIDIA GeForce GTX 1080", "6.1"), ("NVIDIA A100-SXM4-40GB", "8.0")])
    rc, data = doctor(h.root, tree)
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["rule"] == "no-kernel-image"]
    assert f["capability"] == "6.1" and f["files"] == [str(tree / "site-packages/torch/lib/libkernels.so")]
    assert "no kernel image is available" in f["message"]
    assert f["fixes"][0]["text"].startswith("CUDA 13.0 no longer builds for 6.1 (the last that does is CUDA 12.9): "
                                            "install the CUDA 12 wheels (nvidia-cuda-runtime-cu12")
    c = checks(data)["gpu-code"]
    assert [x["status"] for x in c] == ["error", "ok"]
    # A GPU known only from the kernel module's /proc files, by its name.
    h2 = fakehost.ubuntu(tmp_path / "root2", gpus=())
    h2.proc_gpu("0000:01:00.0", "Tesla T4")
    rc, data = doctor(h2.root, tree)
    (f,) = [f for f in data["findings"] if f["rule"] == "no-kernel-image"]
    assert f["capability"] == "7.5" and "install a build with sm_75 code" in f["fixes"][0]["text"]


@needs_nvcc
def test_gpu_code_without_kernels_needs_no_gpu(tmp_path, tmp_path_factory, build, gpu_lib):
    """A library whose only cubin defines no kernel (libcufftw's sm_75) runs
    on an H100: nothing in it is ever launched."""
    empty = Nvcc(find_nvcc(), tmp_path_factory.mktemp("nvcc")).build("libcufftw.so", gencode("75:sm_75"),
                                                                    ("none.cu",))
    tree = cuda13_tree(build)
    lib = tree / "site-packages/nvidia/cu13/lib"
    (lib / "libcufftw.so.12").write_bytes(empty.read_bytes())
    (lib / "libkernels.so").write_bytes(gpu_lib.read_bytes())
    h = fakehost.ubuntu(tmp_path / "root", gpus=[("NVIDIA H100 80GB HBM3", "9.0")])
    rc, data = doctor(h.root, tree)
    assert [f for f in data["findings"] if f["rule"] == "no-kernel-image"] == []
    (c,) = checks(data)["gpu-code"]
    assert c["status"] == "ok" and "1 more hold GPU code that defines no kernel" in c["message"], c
    # A kernel of sm_75 alone is still missing there.
    kernel = Nvcc(find_nvcc(), tmp_path_factory.mktemp("nvcc")).build("libk75.so", gencode("75:sm_75"))
    (lib / "libk75.so").write_bytes(kernel.read_bytes())
    rc, data = doctor(h.root, tree)
    (f,) = [f for f in data["findings"] if f["rule"] == "no-kernel-image"]
    assert f["files"] == [str(lib / "libk75.so")]


@needs_nvcc
def test_the_judge_reads_nothing(tmp_path, build, gpu_lib, monkeypatch):
    """What the judge needs of the GPU code, the kernels of a file that no
    cubin serves on a GPU included, is read while the facts are gathered."""
    from closure_audit.findings import gpu
    from closure_audit.policy.load import parse_policy
    from closure_audit.ops import doctor as op

    tree = cuda13_tree(build)
    (tree / "site-packages/torch/lib").mkdir(parents=True)
    (tree / "site-packages/torch/lib/libkernels.so").write_bytes(gpu_lib.read_bytes())
    h = fakehost.ubuntu(tmp_path / "root", gpus=[("NVIDIA GeForce GTX 1080", "6.1")])
    monkeypatch.setenv("PATH", PATH)
    judge = op.judge_doctor

    def judging(*args):
        monkeypatch.setattr(gpu, "kernels_of", lambda *_: pytest.fail("the judge read a file's kernels"))
        return judge(*args)

    monkeypatch.setattr(op, "judge_doctor", judging)
    from closure_audit.targets import resolve_target, scopes_by_mode

    result = op.run(op.Options(str(h.root), scopes_by_mode([resolve_target(str(tree))]), parse_policy({})))
    assert [f.rule for f in result.findings if f.rule == "no-kernel-image"] == ["no-kernel-image"]


def test_bad_input(tmp_path):
    p = run_cli("doctor", "--host-root", str(tmp_path / "nope"))
    assert p.returncode == 2 and "--host-root is not a directory" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("doctor", "--host-root", str(tmp_path), str(tmp_path / "missing-target"))
    assert p.returncode == 2 and "target not found" in p.stderr


def test_root_is_the_old_spelling_of_host_root(tmp_path):
    """`--root` names the tree in `audit`; doctor's host root is --host-root,
    and the old spelling works for one release, said deprecated in --help."""
    h = fakehost.nixos(tmp_path / "host")
    p = run_cli("doctor", "--root", str(h.root), "--json", env={"PATH": PATH})
    assert doctor(h.root)[1] == json.loads(p.stdout)
    assert p.stderr == "closure-audit: warning: doctor --root is deprecated: use --host-root\n"
    p = run_cli("doctor", "--root", str(tmp_path / "nope"))
    assert p.returncode == 2 and "--root is not a directory" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("doctor", "--root", str(h.root), "--host-root", str(h.root))
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    help_text = " ".join(run_cli("doctor", "--help").stdout.split())
    assert "--host-root DIR read the host under DIR" in help_text
    assert "--root DIR deprecated spelling of --host-root" in help_text


# -- what a target needs, told by the target -----------------------------------------

SITE = "venv/lib/python3.12/site-packages"


def torch_tree(build, cuda="13.0", runtime=True):
    """A pip install of torch for CUDA 13 as NVIDIA's wheels lay it out: torch
    needs libcudart.so.13 through $ORIGIN/../../nvidia/cu13/lib, its METADATA
    requires the runtime's wheel, torch/version.py names the release. With
    runtime=False, the runtime's wheel is not installed."""
    cudart = build.lib(f"{SITE}/nvidia/cu13/lib/libcudart.so.13")
    build.lib(f"{SITE}/torch/lib/libtorch_cuda.so", links=[cudart], rpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN"])
    site = build.root / SITE
    (site / "torch/version.py").write_text(f"from typing import Optional\n\n__version__ = '2.14.1'\n"
                                           f"debug = False\ncuda: Optional[str] = '{cuda}'\n")
    (site / "torch-2.14.1.dist-info").mkdir()
    (site / "torch-2.14.1.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\nRequires-Dist: filelock\n"
        "Requires-Dist: nvidia-cuda-runtime==13.0.96; platform_system == \"Linux\"\n"
        "Requires-Dist: nvidia-cublas==13.1.0.3; platform_system == \"Linux\"\n\n"
        "The long description, not a header: Requires-Dist: nvidia-cuda-runtime-cu99==99.0\n")
    if runtime:
        (site / "nvidia_cuda_runtime-13.0.96.dist-info").mkdir()
    else:
        os.unlink(cudart)
    return site


def test_a_torch_tree_whose_cuda_libraries_lie_elsewhere_needs_cuda_13(tmp_path, build):
    """The target is site-packages/torch; the CUDA runtime lives beside it in
    nvidia/cu13. The driver (550) is too old for CUDA 13."""
    site = torch_tree(build)
    h = fakehost.ubuntu(tmp_path / "root", driver="550.54.14")
    rc, data = doctor(h.root, site / "torch")
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-too-old" and (f["runtime"], f["needs"], f["driver"]) == ("13.0", "580.65.06", "550.54.14")
    evidence = {(e["release"], e["source"], e["file"]) for e in f["evidence"]}
    assert evidence == {
        ("13.x", "DT_NEEDED libcudart.so.13", str(site / "torch/lib/libtorch_cuda.so")),
        ("13.0", "cuda: Optional[str] = '13.0'", str(site / "torch/version.py")),
        ("13.0", 'Requires-Dist: nvidia-cuda-runtime==13.0.96; platform_system == "Linux"',
         str(site / "torch-2.14.1.dist-info/METADATA")),
        ("13.0", "wheel nvidia_cuda_runtime-13.0.96.dist-info", str(site / "nvidia_cuda_runtime-13.0.96.dist-info")),
    }
    (check,) = checks(data)["cuda-runtime"]
    assert check["evidence"] == f["evidence"] and check["message"].startswith("CUDA 13.0 (from ")
    # A pip tree on Ubuntu gets the fixes of its kind: the driver package, the
    # CUDA 12 wheels and a torch pin; nothing of Nix.
    fixes = [x["text"] for x in f["fixes"]]
    assert fixes[0] == ("upgrade the NVIDIA driver to 580.65.06 or newer with Ubuntu's package: "
                        "sudo apt install nvidia-driver-580, then reboot")
    assert fixes[1].startswith("or install builds for CUDA 12.4 instead: the CUDA 12 wheels (nvidia-cuda-runtime-cu12 "
                               "and the other nvidia-*-cu12 wheels) and a torch built for CUDA 12.4 or an older 12.x: "
                               'pip install "torch==2.14.1"')
    assert fixes[1].endswith("CUDA 12.4 is the newest release driver 550.54.14 runs fully (it needs 550.54.14)")
    assert not any(w in x for x in fixes for w in ("cudaPackages", "cudaCapabilities", "configuration.nix", "meets"))


def test_a_store_path_keeps_the_nix_fixes(tmp_path, build, monkeypatch):
    h = fakehost.ubuntu(tmp_path / "root", driver="550.54.14")
    h.link("/run/opengl-driver/lib", "/usr/lib/x86_64-linux-gnu")
    rc, data = doctor(h.root, store_target(build, monkeypatch))
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-too-old" and f["runtime"] == "13.0"
    assert f["fixes"][1]["text"] == ("or rebuild the target with cudaPackages_12_4: CUDA 12.4 is the newest release "
                                     "driver 550.54.14 runs fully (it needs 550.54.14)")
    assert "cudaPackages.cuda_compat" in f["fixes"][2]["text"]


def test_the_highest_release_named_is_judged(tmp_path, build):
    """torch/version.py says 12.8, a library needs libcudart.so.13: CUDA 13 is judged."""
    site = torch_tree(build, cuda="12.8")
    h = fakehost.ubuntu(tmp_path / "root", driver="570.86.15")
    rc, data = doctor(h.root, build.root / "venv")
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "driver-too-old" and f["runtime"] == "13.0"
    assert ("12.8", str(site / "torch/version.py")) in {(e["release"], e["file"]) for e in f["evidence"]}


def test_wheel_metadata_tells_the_release(tmp_path):
    from closure_audit.cuda.release import from_packages, highest

    for name in ("nvidia_cublas_cu12-12.4.5.8.dist-info", "nvidia_cufft-12.0.0.61.dist-info", "numpy-2.1.0.dist-info"):
        (tmp_path / name).mkdir()
    found = from_packages(str(tmp_path), sorted(os.listdir(tmp_path)))
    # cuFFT numbers itself (12.0 ships with CUDA 13): only a -cuNN suffix or a runtime's version tells.
    assert [(n.label, n.source) for n in found] == [("12.x", "wheel nvidia_cublas_cu12-12.4.5.8.dist-info")]
    assert highest(found).release == (12, 0) and highest([]) is None


def test_a_tree_without_any_cuda_runtime_is_an_error(tmp_path, build):
    """torch needs libcudart.so.13; neither the tree (no nvidia-cuda-runtime
    wheel) nor the host has it."""
    site = torch_tree(build, runtime=False)
    h = fakehost.ubuntu(tmp_path / "root")
    rc, data = doctor(h.root, build.root / "venv")
    assert rc == 1
    (f,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert f["rule"] == "cuda-runtime-missing" and (f["needed"], f["wheel"]) == ("libcudart.so.13", "nvidia-cuda-runtime==13.*")
    assert f["file"] == str(site / "torch/lib/libtorch_cuda.so") and "libcudart.so.13" in f["message"]
    assert f["fixes"][0]["text"] == 'pip install "nvidia-cuda-runtime==13.*"'
    assert checks(data)["cuda-runtime"][0]["status"] == "error"
    # The host's copy is what the tree's loader would find: no such error then.
    shutil.copy(build.lib("elsewhere/libcudart.so.13"), h.path("/usr/lib/x86_64-linux-gnu/libcudart.so.13"))
    rc, data = doctor(h.root, build.root / "venv")
    assert "cuda-runtime-missing" not in {f["rule"] for f in data["findings"]}


LOADS_CUDART = "import ctypes, os; ctypes.CDLL('libcudart.so.13', mode=os.RTLD_NOW)"


def this_machine_with_cudart(tmp_path, build) -> list[str]:
    """A command prefix under which this machine's own loader finds a
    libcudart.so.13 in its default directories: none where it already does
    (a CUDA install in ld.so.conf), else a private mount namespace whose
    ld.so.conf.d and ld.so.cache add a directory holding one."""
    import subprocess
    import sys

    if subprocess.run([sys.executable, "-c", LOADS_CUDART]).returncode == 0:
        return []
    lib = build.lib("machine-cuda/libcudart.so.13").parent
    conf = tmp_path / "ld.so.conf.d"
    shutil.copytree("/etc/ld.so.conf.d", conf)
    (conf / "zz-machine-cuda.conf").write_text(f"{lib}\n")
    cache = tmp_path / "ld.so.cache"
    ldconfig = shutil.which("ldconfig", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "ldconfig"
    script = (f"mount --bind {conf} /etc/ld.so.conf.d && {ldconfig} -X -C {cache} && "
              f"mount --bind {cache} /etc/ld.so.cache && exec \"$@\"")
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
    works = shutil.which("unshare") and os.geteuid() == 0 and subprocess.run(
        prefix + [sys.executable, "-c", LOADS_CUDART], capture_output=True).returncode == 0
    require("a private mount namespace (unshare, as root) to give this machine a libcudart.so.13", bool(works))
    return prefix


def test_host_root_is_the_host_the_loader_searches(tmp_path, build):
    """Under --host-root the tree's libraries are searched in the root's
    ld.so.conf and default directories, not this machine's: a torch tree
    without the CUDA runtime (two objects need it) on a fake host without one
    is cuda-runtime-missing even where this machine's loader has one."""
    import subprocess
    import sys

    site = torch_tree(build, runtime=False)
    # torch's extension needs libtorch_cuda.so and the runtime itself: where the
    # runtime comes from the host, libtorch_cuda's need finds it loaded already.
    elsewhere = build.lib("elsewhere/libcudart.so.13")
    build.lib(f"{SITE}/torch/_C.so", links=[site / "torch/lib/libtorch_cuda.so", elsewhere],
              rpath=["$ORIGIN/lib"])
    prefix = this_machine_with_cudart(tmp_path, build)
    h = fakehost.ubuntu(tmp_path / "root")

    def missing(*host_root: str) -> set[str]:
        p = subprocess.run(prefix + [sys.executable, "-m", "closure_audit", "doctor", *host_root,
                                     str(build.root / "venv"), "--json"],
                           capture_output=True, text=True, env={**os.environ, "PATH": PATH})
        assert p.returncode in (0, 1), p.stderr
        return {f["needed"] for f in json.loads(p.stdout)["findings"] if f["rule"] == "cuda-runtime-missing"}

    assert missing() == set()  # this machine: its loader finds libcudart.so.13
    assert missing("--host-root", str(h.root)) == {"libcudart.so.13"}
    # And the fake host's own copy, in its ld.so.conf, is found, through a
    # link that is absolute on the host (the root's /opt, not this machine's).
    shutil.copy(elsewhere, h.path("/opt/cuda-13.0/lib/libcudart.so.13.0.96"))
    h.link("/usr/local/lib/x86_64-linux-gnu/libcudart.so.13", "/opt/cuda-13.0/lib/libcudart.so.13.0.96")
    assert missing("--host-root", str(h.root)) == set()


def test_target_defects_show_on_a_host_without_a_driver(tmp_path, build, monkeypatch):
    """missing-driver-runpath does not depend on the host."""
    h = fakehost.FakeHost(tmp_path / "root")
    h.os_release("NixOS 24.11 (Vicuna)", "nixos")
    h.file("/etc/NIXOS", "")
    rc, data = doctor(h.root, store_target(build, monkeypatch, runpath=None))
    assert rc == 1
    rules = sorted(f["rule"] for f in data["findings"] if f["severity"] == "error")
    assert rules == ["driver-missing", "driver-unreachable", "gpu-not-found"]
    (f,) = [f for f in data["findings"] if f["rule"] == "driver-unreachable"]
    assert "missing-driver-runpath" in f["message"] and len(f["fixes"]) == 1


LOADS = "import ctypes, os, sys; ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW).f()"


def asks_for_the_driver(lib) -> bool:
    """glibc's answer: whether loading the object and running its code looks
    for libcuda.so.1 (LD_DEBUG=libs), whatever this machine holds."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", LOADS, str(lib)], capture_output=True, text=True,
                       env={**os.environ, "LD_DEBUG": "libs"}, timeout=60)
    assert p.returncode == 0, p.stderr
    return "find library=libcuda.so.1" in p.stderr


def test_a_target_without_cuda_does_not_fail_for_want_of_a_driver(tmp_path, build):
    """A host without a driver or a GPU: a tree none of whose objects loads
    the driver (glibc never looks for it) passes, the host's lack said as
    info; once an object opens libcuda.so.1, the same host fails it."""
    h = fakehost.FakeHost(tmp_path / "root")
    h.os_release("Ubuntu 24.04.1 LTS", "ubuntu")
    plain = build.lib(f"{SITE}/plain/libplain.so", code="int f(void) { return 0; }\n")
    rc, data = doctor(h.root, build.root / "venv")
    assert rc == 0
    assert {(f["rule"], f["severity"]) for f in data["findings"]} == {("driver-missing", "info"),
                                                                      ("gpu-not-found", "info")}
    assert [(c["check"], c["status"]) for c in data["checks"] if c["rule"]] == [("driver-library", "info"),
                                                                                ("gpus", "info")]
    assert all(c["message"].endswith("; no target uses CUDA") for c in data["checks"] if c["rule"])
    assert not asks_for_the_driver(plain)
    opener = build.lib(f"{SITE}/plain/libopener.so",
                       code='#include <dlfcn.h>\nint f(void) { return dlopen("libcuda.so.1", RTLD_NOW) != 0; }\n')
    rc, data = doctor(h.root, build.root / "venv")
    assert rc == 1
    assert {(f["rule"], f["severity"]) for f in data["findings"]} >= {("driver-missing", "error"),
                                                                      ("gpu-not-found", "error")}
    assert asks_for_the_driver(opener)
    # The host alone: asked whether CUDA programs run here, it fails.
    assert doctor(h.root)[0] == 1


# -- the GPU, as the driver tells it ------------------------------------------------------

def test_nvidia_smi_compute_cap_beats_the_model_table(tmp_path):
    h = fakehost.ubuntu(tmp_path / "root", gpus=[("NVIDIA GeForce RTX 3090", "8.6"), ("NVIDIA H100 80GB HBM3", "9.0")])
    # The kernel module names the second GPU otherwise (listed first: matched by PCI address).
    h.proc_gpu("0000:01:00.0", "NVIDIA GeForce RTX 3090")
    h.proc_gpu("0001:01:00.0", "NVIDIA GeForce GTX 1080")
    rc, data = doctor(h.root)
    gpus = data["host"]["gpus"]
    assert [(g["capability"], g["source"], g["model_capability"]) for g in gpus] == [
        ("8.6", "nvidia-smi", "8.6"), ("9.0", "nvidia-smi", "6.1")]
    assert gpus[1]["model_source"] == "/proc/driver/nvidia/gpus/0001:01:00.0/information"
    (f,) = [f for f in data["findings"] if f["rule"] == "gpu-capability-mismatch"]
    assert f["severity"] == "warning" and (f["capability"], f["model_capability"]) == ("9.0", "6.1")
    assert f["message"] == ("GPU 1: NVIDIA H100 80GB HBM3, compute capability 9.0 (nvidia-smi); the model table gives "
                            "6.1 for 'NVIDIA GeForce GTX 1080' (/proc/driver/nvidia/gpus/0001:01:00.0/information): "
                            "nvidia-smi's 9.0 is used")
    assert [c["status"] for c in checks(data)["gpus"]] == ["ok", "warning"]


def test_a_driver_that_cannot_tell_compute_cap_leaves_the_model_table(tmp_path):
    h = fakehost.ubuntu(tmp_path / "root", gpus=[("Tesla T4", "[N/A]")])
    rc, data = doctor(h.root)
    ((g),) = data["host"]["gpus"]
    assert g["capability"] == "7.5" and "model table" in g["source"]
    assert "gpu-capability-mismatch" not in {f["rule"] for f in data["findings"]}


# -- several targets ---------------------------------------------------------------

def test_the_first_example_of_the_doc_page_runs(tmp_path, build, monkeypatch):
    """docs/commands/doctor.md's example with a store path and a venv, on fixtures."""
    from conftest import ROOT

    example = next(line for line in (ROOT / "docs/commands/doctor.md").read_text().splitlines()
                   if line.startswith("closure-audit doctor ") and "--json" in line)
    args = example.split(" # ")[0].split()[2:]
    store = store_target(build, monkeypatch)
    torch_tree(build)
    os.symlink(store, tmp_path / "result")
    paths = {"./result": str(tmp_path / "result"), "~/venv": str(build.root / "venv")}
    assert set(paths) <= set(args), example
    h = fakehost.nixos(tmp_path / "root")
    p = run_cli("doctor", *[paths.get(a, a) for a in args], "--host-root", str(h.root), env={"PATH": PATH})
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    validate(data)
    assert data["mode"] == "mixed" and data["target"] == [str(store), str(build.root / "venv")]
    c = checks(data)
    assert len(c["driver-library"]) == 2 and len(c["cuda-runtime"]) == 2
    assert c["driver-library"][0]["message"].startswith(f"{store}: the target's 1 object")
    assert c["cuda-runtime"][1]["message"].startswith(f"{build.root / 'venv'}: CUDA 13.0")
