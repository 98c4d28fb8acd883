"""Fake hosts under a temporary root for `closure-audit doctor --host-root`:
the files and commands each kind of host has, with a driver library built
by gcc that carries a version string, and a fake nvidia-smi."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

SMI = """#!/bin/sh
case "$*" in
  *driver_version*) echo "{driver}" ;;
  *name,compute_cap,pci.bus_id*) echo "name, compute_cap, pci.bus_id"
{rows}
  ;;
  *) exit 2 ;;
esac
"""


class FakeHost:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, host_path: str) -> Path:
        p = self.root / host_path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def file(self, host_path: str, text: str) -> Path:
        p = self.path(host_path)
        p.write_text(text)
        return p

    def link(self, host_path: str, target: str) -> None:
        os.symlink(target, self.path(host_path))

    def os_release(self, pretty: str, ident: str) -> None:
        self.file("/etc/os-release", f'NAME="{pretty.split()[0]}"\nID={ident}\nPRETTY_NAME="{pretty}"\n')

    def libcuda(self, directory: str, file_name: str, version_string: str | None = None) -> Path:
        """libcuda.so.1 -> file_name in `directory`, a real shared object built by gcc."""
        src = self.root.parent / f"libcuda-{abs(hash((directory, file_name)))}.c"
        text = "int cuInit(unsigned f) { return (int) f; }\n"
        if version_string:
            text += f'const char nvidia_version[] = "{version_string}";\n'
        src.write_text(text)
        out = self.path(f"{directory}/{file_name}")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src), "-Wl,-soname,libcuda.so.1"],
                       check=True, capture_output=True)
        if file_name != "libcuda.so.1":
            self.link(f"{directory}/libcuda.so.1", file_name)
        return out

    def library(self, host_path: str) -> Path:
        """A shared object built by gcc, named as its file."""
        src = self.root.parent / "empty.c"
        src.write_text("int nixcuda_fake_host;\n")
        out = self.path(host_path)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)
        return out

    def userland(self) -> None:
        """What running a fix's command on the host takes: sh, mkdir and ln
        with the libraries they load, copied from this machine, and a sudo
        that runs its arguments (the command runs as root already)."""
        for tool in ("sh", "mkdir", "ln"):
            real = os.path.realpath(shutil.which(tool, path="/usr/bin:/bin"))
            shutil.copy(real, self.path(f"/bin/{tool}"))
            ldd = subprocess.run(["ldd", real], capture_output=True, text=True, check=True).stdout
            for lib in re.findall(r"(/\S+) \(0x", ldd):
                if not self.path(lib).exists():
                    shutil.copy(lib, self.path(lib))
        self.file("/bin/sudo", '#!/bin/sh\nexec "$@"\n').chmod(0o755)

    def run(self, command: str) -> None:
        """Run a shell command on the host as root: in a chroot of the root,
        so every absolute path in it is the host's (userland() first)."""
        chroot = shutil.which("chroot", path="/usr/sbin:/sbin:/usr/bin:/bin")
        p = subprocess.run([chroot, str(self.root), "/bin/sh", "-c", command], capture_output=True, text=True,
                           env={"PATH": "/bin"})
        assert p.returncode == 0, (command, p.stderr)

    def kernel_module(self, version: str, open_module: bool = False) -> None:
        flavor = "NVIDIA UNIX Open Kernel Module for x86_64" if open_module else "NVIDIA UNIX x86_64 Kernel Module"
        self.file("/proc/driver/nvidia/version",
                  f"NVRM version: {flavor}  {version}  Release Build  Thu Feb 22 01:44:30 UTC 2024\n"
                  "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")

    def nvidia_smi(self, gpus: list[tuple[str, str]], driver: str, where: str = "/fakebin") -> None:
        """nvidia-smi as drivers since 510 answer: each GPU's name, compute_cap
        (`[N/A]` where the driver cannot tell) and PCI address (0000000N:01:00.0)."""
        rows = "\n".join(f'echo "{name}, {cap}, 0000000{i}:01:00.0"' for i, (name, cap) in enumerate(gpus))
        p = self.file(f"{where}/nvidia-smi", SMI.format(driver=driver, rows=rows))
        p.chmod(0o755)

    def proc_gpu(self, bus: str, model: str) -> None:
        """The kernel module's file for one GPU; `bus` as /proc names it (0000:01:00.0)."""
        self.file(f"/proc/driver/nvidia/gpus/{bus}/information",
                  f"Model: \t\t {model}\nIRQ:   \t\t 41\nGPU UUID: \t GPU-286ec11f-9458-1eb9-3f6d-6fe6f872c8e1\n"
                  "Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                  f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\nDevice Minor: \t 0\n"
                  "GPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n")


def nixos(root: Path, driver: str = "580.82.07", kernel: str | None = None) -> FakeHost:
    h = FakeHost(root)
    h.os_release("NixOS 24.11 (Vicuna)", "nixos")
    h.file("/etc/NIXOS", "")
    store = f"/nix/store/0c7lbzb3mw4r3fkg2ixv1y2pc6ln0ddn-nvidia-x11-{driver}-6.6.30"
    h.libcuda(f"{store}/lib", f"libcuda.so.{driver}")
    h.link("/run/opengl-driver", f"/nix/store/1d9xqn9q7h6m5dbsz2n6f0l0b3ajqfxz-graphics-drivers")
    h.link("/nix/store/1d9xqn9q7h6m5dbsz2n6f0l0b3ajqfxz-graphics-drivers", store)
    h.kernel_module(kernel or driver)
    h.nvidia_smi([("NVIDIA GeForce RTX 3090", "8.6")], driver)
    return h


def ubuntu(root: Path, driver: str = "580.82.07", kernel: str | None = None,
           gpus=(("NVIDIA GeForce RTX 3090", "8.6"),)) -> FakeHost:
    h = FakeHost(root)
    h.os_release("Ubuntu 24.04.1 LTS", "ubuntu")
    h.file("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    h.file("/etc/ld.so.conf.d/x86_64-linux-gnu.conf", "/usr/local/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n")
    h.libcuda("/usr/lib/x86_64-linux-gnu", f"libcuda.so.{driver}")
    h.kernel_module(kernel or driver, open_module=True)
    if gpus:
        h.nvidia_smi(list(gpus), driver)
    return h


def wsl(root: Path, driver: str = "560.94") -> FakeHost:
    h = FakeHost(root)
    h.os_release("Ubuntu 22.04.4 LTS", "ubuntu")
    h.file("/proc/version", "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@1e3a) #1 SMP\n")
    h.libcuda("/usr/lib/wsl/lib", "libcuda.so.1.1", version_string=f"NVIDIA CUDA driver {driver} for WSL")
    h.nvidia_smi([("NVIDIA GeForce RTX 4070", "8.9")], driver, where="/usr/lib/wsl/lib")
    return h


def jetson(root: Path) -> FakeHost:
    h = FakeHost(root)
    h.os_release("Ubuntu 22.04.4 LTS", "ubuntu")
    h.file("/etc/nv_tegra_release", "# R36 (release), REVISION: 3.0, GCID: 36191598, BOARD: generic, "
                                    "EABI: aarch64, DATE: Mon May  6 17:34:21 UTC 2024\n")
    h.file("/proc/device-tree/compatible", "nvidia,p3737-0000+p3701-0005\0nvidia,p3701-0005\0nvidia,tegra234\0")
    h.libcuda("/usr/lib/aarch64-linux-gnu/nvidia", "libcuda.so.1.1", version_string="NVIDIA CUDA 540.3.0 (L4T)")
    return h


def container_h200(root: Path, driver: str = "580.159.04") -> FakeHost:
    """Ubuntu in a container whose runtime mounted the driver into
    /usr/local/nvidia/lib64, a directory ld.so.conf does not name."""
    h = FakeHost(root)
    h.os_release("Ubuntu 24.04.3 LTS", "ubuntu")
    h.file("/.dockerenv", "")
    h.file("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    h.file("/etc/ld.so.conf.d/x86_64-linux-gnu.conf", "/usr/local/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n")
    h.libcuda("/usr/local/nvidia/lib64", f"libcuda.so.{driver}")
    h.library(f"/usr/local/nvidia/lib64/libnvidia-ml.so.{driver}")
    h.link("/usr/local/nvidia/lib64/libnvidia-ml.so.1", f"libnvidia-ml.so.{driver}")
    h.kernel_module(driver, open_module=True)
    h.nvidia_smi([("NVIDIA H200", "9.0")], driver)
    return h
