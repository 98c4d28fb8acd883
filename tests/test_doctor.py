"""`closure-audit doctor` on fake hosts laid out under a temporary root
(NixOS, Ubuntu-like, WSL, Jetson), in text and JSON."""

from __future__ import annotations

import json
import os

import pytest

import fakehost
from conftest import run_cli, validate
from cudagen import Nvcc, find_nvcc, gencode
from closure_audit.gpu.models import capability_of
from closure_audit.host.probe import probe
from closure_audit.host.root import Root
from parts import needs

pytestmark = pytest.mark.fhs
needs_nvcc = needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", find_nvcc() is not None)

PATH = "/fakebin:/usr/bin:/bin"


def doctor(root, *targets, json_out=True, env=None):
    args = ["doctor", "--root", str(root), *map(str, targets)] + (["--json"] if json_out else [])
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
    assert "CUDA 13.0" in c["cuda-runtime"][0]["message"]  # from libcublas.so.13's SONAME
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
    assert f["fixes"][0]["text"].startswith("upgrade the driver to 580.65.06")
    assert any("cuda_compat" in x["text"] for x in f["fixes"])
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
    assert 'cudaPackages_12_9 and cudaCapabilities = [ "6.1" ]' in f["fixes"][0]["text"]
    c = checks(data)["gpu-code"]
    assert [x["status"] for x in c] == ["error", "ok"]
    # A GPU known only from the kernel module's /proc files, by its name.
    h2 = fakehost.ubuntu(tmp_path / "root2", gpus=())
    h2.proc_gpu("0000:01:00.0", "Tesla T4")
    rc, data = doctor(h2.root, tree)
    (f,) = [f for f in data["findings"] if f["rule"] == "no-kernel-image"]
    assert f["capability"] == "7.5" and 'rebuild with cudaCapabilities = [ "7.5" ]' in f["fixes"][0]["text"]


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


def test_bad_input(tmp_path):
    p = run_cli("doctor", "--root", str(tmp_path / "nope"))
    assert p.returncode == 2 and "--root is not a directory" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("doctor", "--root", str(tmp_path), str(tmp_path / "missing-target"))
    assert p.returncode == 2 and "target not found" in p.stderr
