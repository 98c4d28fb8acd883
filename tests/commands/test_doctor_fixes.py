"""doctor recognizes its own fixes: each fix it prints, applied to a fake
host under --host-root (a command run on that host, in a chroot of the root;
a variable set for the shell doctor then runs in; or, for what no command
here can do, such as a reboot, its effect on the host's files), turns its
line ok."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import fakehost
from conftest import run_cli
from parts import require
from test_doctor import PATH, store_target, torch_tree

pytestmark = pytest.mark.fhs


def doctor(root, *targets, env=None) -> dict:
    p = run_cli("doctor", "--host-root", str(root), *map(str, targets), "--json", env={"PATH": PATH, **(env or {})})
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def line(data, check: str) -> dict:
    (found,) = [c for c in data["checks"] if c["check"] == check]
    return found


def fix(data, rule: str, starts: str) -> str:
    """The text of `rule`'s fix that starts so."""
    (f,) = [f for f in data["findings"] if f["rule"] == rule]
    return next(x["text"] for x in f["fixes"] if x["text"].startswith(starts))


def command(text: str) -> str:
    """The command a fix gives after its colon, verbatim."""
    return text.split(": ", 1)[1]


def chroot_host(tmp_path) -> fakehost.FakeHost:
    """The H200 container whose doctor kept asking for the driver directory,
    with what a command on it takes."""
    require("root, for chroot (the fix is run as on the host)",
            os.geteuid() == 0 and bool(shutil.which("chroot", path="/usr/sbin:/sbin:/usr/bin:/bin")))
    h = fakehost.container_h200(tmp_path / "root")
    h.userland()
    return h


# -- the driver directory for Nix programs -----------------------------------------

def test_linking_the_driver_directory_turns_the_host_line_ok(tmp_path):
    h = chroot_host(tmp_path)
    data = doctor(h.root)
    assert line(data, "driver-library")["rule"] == "no-driver-directory"
    h.run(command(fix(data, "no-driver-directory", "link the driver's libraries")))
    data = doctor(h.root)
    assert line(data, "driver-library")["status"] == "ok", line(data, "driver-library")
    assert "find it in /run/opengl-driver/lib" in line(data, "driver-library")["message"]
    assert data["findings"] == []


def test_linking_the_driver_directory_lets_a_store_path_reach_the_driver(tmp_path, build, monkeypatch):
    h = chroot_host(tmp_path)
    target = store_target(build, monkeypatch)
    data = doctor(h.root, target)
    assert line(data, "driver-library")["rule"] == "driver-unreachable"
    h.run(command(fix(data, "driver-unreachable", "link the driver's libraries")))
    data = doctor(h.root, target)
    assert line(data, "driver-library")["status"] == "ok", line(data, "driver-library")
    assert "driver-unreachable" not in {f["rule"] for f in data["findings"]}


def with_shell(text: str) -> dict:
    """The variable a `for one shell: export NAME=VALUE` fix sets."""
    name, _, value = command(text).removeprefix("export ").partition("=")
    return {name: value}


@pytest.mark.parametrize("target", [None, "hooked", "unhooked"])
def test_ld_library_path_for_one_shell_turns_the_line_ok(tmp_path, build, monkeypatch, target):
    """no-driver-directory, driver-unreachable and missing-driver-runpath:
    each offers LD_LIBRARY_PATH for one shell; doctor run in that shell
    says the driver is found, and through what."""
    h = fakehost.container_h200(tmp_path / "root")
    targets = [] if target is None else [store_target(build, monkeypatch, runpath=(
        ("/run/opengl-driver/lib",) if target == "hooked" else None))]
    data = doctor(h.root, *targets)
    rule = line(data, "driver-library")["rule"]
    assert rule == ("no-driver-directory" if target is None else "driver-unreachable")
    env = with_shell(fix(data, rule, "for one shell"))
    assert env == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    data = doctor(h.root, *targets, env=env)
    assert line(data, "driver-library")["status"] == "ok", line(data, "driver-library")
    assert "LD_LIBRARY_PATH (/usr/local/nvidia/lib64/libcuda.so.1, for this shell only)" in \
        line(data, "driver-library")["message"]


# -- the target -----------------------------------------------------------------------

def test_rebuilding_with_the_runpath_hook_reaches_the_driver(tmp_path, build, monkeypatch):
    """missing-driver-runpath: what autoAddOpenGLRunpathHook does, adding the
    driver directory to the runpath, turns the line ok on NixOS."""
    h = fakehost.nixos(tmp_path / "root")
    target = store_target(build, monkeypatch, runpath=None)
    data = doctor(h.root, target)
    assert "autoAddOpenGLRunpathHook" in fix(data, "driver-unreachable", "rebuild it with")
    lib = target / "lib/libcublas.so.13"
    subprocess.run(["patchelf", "--add-rpath", "/run/opengl-driver/lib", str(lib)], check=True)
    data = doctor(h.root, target)
    assert line(data, "driver-library")["status"] == "ok" and data["summary"]["error"] == 0, data["findings"]


def test_installing_the_runtime_wheel_turns_cuda_runtime_ok(tmp_path, build):
    """cuda-runtime-missing: pip install "nvidia-cuda-runtime==13.*" puts
    libcudart.so.13 in nvidia/cu13/lib, where torch's runpath looks."""
    site = torch_tree(build, runtime=False)
    h = fakehost.ubuntu(tmp_path / "root")
    data = doctor(h.root, build.root / "venv")
    assert fix(data, "cuda-runtime-missing", "pip install") == 'pip install "nvidia-cuda-runtime==13.*"'
    build.lib("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13")
    (site / "nvidia_cuda_runtime-13.0.96.dist-info").mkdir()
    data = doctor(h.root, build.root / "venv")
    assert [c["status"] for c in data["checks"] if c["check"] == "cuda-runtime"] == ["ok"], data["checks"]


# -- the driver and its kernel module -----------------------------------------------------

def test_rebooting_loads_the_new_kernel_module(tmp_path):
    """driver-kernel-mismatch's first fix, a reboot: the kernel then loads the
    module of the user-space driver installed."""
    h = fakehost.nixos(tmp_path / "root", driver="550.54.14", kernel="550.40.07")
    data = doctor(h.root)
    assert fix(data, "driver-kernel-mismatch", "reboot") == "reboot, so the kernel loads the 550.54.14 module"
    h.kernel_module("550.54.14")
    assert line(doctor(h.root), "kernel-module")["status"] == "ok"


def test_switching_back_to_the_loaded_driver(tmp_path):
    """Its second fix: the user-space driver of the module still loaded."""
    h = fakehost.ubuntu(tmp_path / "root", driver="550.54.14", kernel="550.40.07")
    data = doctor(h.root)
    assert fix(data, "driver-kernel-mismatch", "or switch back").startswith("or switch back to the 550.40.07 driver")
    lib = "/usr/lib/x86_64-linux-gnu"
    os.unlink(h.path(f"{lib}/libcuda.so.1"))
    h.libcuda(lib, "libcuda.so.550.40.07")
    assert line(doctor(h.root), "kernel-module")["status"] == "ok"


def test_loading_the_kernel_module(tmp_path):
    """driver-missing without /proc/driver/nvidia/version: sudo modprobe nvidia."""
    h = fakehost.ubuntu(tmp_path / "root")
    os.unlink(h.path("/proc/driver/nvidia/version"))
    data = doctor(h.root)
    assert fix(data, "driver-missing", "load it") == "load it: sudo modprobe nvidia (after installing or " \
                                                      "upgrading the driver: reboot)"
    h.kernel_module("580.82.07", open_module=True)
    data = doctor(h.root)
    assert line(data, "kernel-module")["status"] == "ok" and data["summary"]["error"] == 0, data["findings"]


def test_upgrading_the_driver_runs_cuda_13(tmp_path, build):
    """driver-too-old: Ubuntu's driver package, then a reboot (its library
    and its module)."""
    h = fakehost.ubuntu(tmp_path / "root", driver="550.54.14")
    site = torch_tree(build)
    data = doctor(h.root, site / "torch")
    assert fix(data, "driver-too-old", "upgrade") == ("upgrade the NVIDIA driver to 580.65.06 or newer with "
                                                      "Ubuntu's package: sudo apt install nvidia-driver-580, "
                                                      "then reboot")
    lib = "/usr/lib/x86_64-linux-gnu"
    os.unlink(h.path(f"{lib}/libcuda.so.1"))
    h.libcuda(lib, "libcuda.so.580.95.05")
    h.kernel_module("580.95.05", open_module=True)
    data = doctor(h.root, site / "torch")
    assert line(data, "cuda-runtime")["status"] == "ok" and data["summary"]["error"] == 0, data["findings"]


def test_removing_the_stubs_directory_reaches_the_driver(tmp_path, build, monkeypatch):
    """A stub libcuda ahead of the driver directory: without the stubs
    directory in the runpath, the driver directory's libcuda is loaded."""
    h = fakehost.nixos(tmp_path / "root")
    stubs = "0000000000000000000000000000stub-cuda_cudart-13.0/lib/stubs"
    build.lib(f"store/{stubs}/libcuda.so.1", soname="libcuda.so.1")
    target = store_target(build, monkeypatch, runpath=(f"{build.root}/store/{stubs}", "/run/opengl-driver/lib"))
    data = doctor(h.root, target)
    assert fix(data, "driver-unreachable", "remove the stubs directory")
    subprocess.run(["patchelf", "--set-rpath", "/run/opengl-driver/lib", str(target / "lib/libcublas.so.13")],
                   check=True)
    data = doctor(h.root, target)
    assert line(data, "driver-library")["status"] == "ok" and data["summary"]["error"] == 0, data["findings"]


def test_installing_the_driver(tmp_path):
    """driver-missing on Ubuntu: its driver package, then a reboot."""
    h = fakehost.ubuntu(tmp_path / "root")
    lib = "/usr/lib/x86_64-linux-gnu"
    for name in ("libcuda.so.1", "libcuda.so.580.82.07"):
        os.unlink(h.path(f"{lib}/{name}"))
    os.unlink(h.path("/proc/driver/nvidia/version"))
    data = doctor(h.root)
    assert fix(data, "driver-missing", "install") == ("install the NVIDIA driver with Ubuntu's package: "
                                                      "sudo ubuntu-drivers install, then reboot")
    h.libcuda(lib, "libcuda.so.580.95.05")
    h.kernel_module("580.95.05", open_module=True)
    data = doctor(h.root)
    assert line(data, "driver-library")["status"] != "error" and data["summary"]["error"] == 0, data["findings"]


def test_upgrading_the_driver_past_minor_version_compatibility(tmp_path, build):
    """driver-minor-compat: the driver CUDA 12.4 asks for itself."""
    h = fakehost.ubuntu(tmp_path / "root", driver="535.183.01")
    build.lib("lib/libcudart.so.12.4.127", soname="libcudart.so.12")
    data = doctor(h.root, build.root)
    assert fix(data, "driver-minor-compat", "upgrade").startswith("upgrade the NVIDIA driver to 550.54.14 or newer")
    lib = "/usr/lib/x86_64-linux-gnu"
    os.unlink(h.path(f"{lib}/libcuda.so.1"))
    h.libcuda(lib, "libcuda.so.550.54.14")
    h.kernel_module("550.54.14", open_module=True)
    data = doctor(h.root, build.root)
    assert line(data, "cuda-runtime")["status"] == "ok" and data["findings"] == [], data["findings"]


def test_a_container_started_with_the_gpu(tmp_path):
    """gpu-not-found in a container: started with --gpus all, the runtime
    mounts nvidia-smi and the driver's /proc files in."""
    h = fakehost.container_h200(tmp_path / "root")
    os.unlink(h.path("/fakebin/nvidia-smi"))
    data = doctor(h.root)
    assert "start it with --gpus all" in fix(data, "gpu-not-found", "check that the GPU is seen")
    h.nvidia_smi([("NVIDIA H200", "9.0")], "580.159.04")
    assert line(doctor(h.root), "gpus")["status"] == "ok"
