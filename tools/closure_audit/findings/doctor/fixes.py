"""The fixes more than one check offers: getting a driver onto this host,
and what a pip tree installs for a CUDA release.

Takes: the Host, a driver version or a CUDA release. Gives: Fixes (and
the pip line for a release) that checks offer.
"""

from __future__ import annotations

from ...cuda.libraries import wheel_for
from ...host.probe import Host
from .facts import Fix


def driver_fix(host: Host, version: str | None, upgrade: bool = False) -> Fix:
    """How this host gets an NVIDIA driver (`version` or newer, when a target asks)."""
    act = (f"upgrade the NVIDIA driver to {version} or newer" if upgrade else
           "install the NVIDIA driver" + (f" {version} or newer" if version else ""))
    if host.kind == "nixos":
        return Fix(f"{act} in configuration.nix: hardware.graphics.enable = true; services.xserver.videoDrivers = "
                   "[ \"nvidia\" ]; hardware.nvidia.package = config.boot.kernelPackages.nvidiaPackages.production "
                   "(or .latest); then nixos-rebuild switch and reboot",
                   "the NixOS way: the driver directory follows the system generation")
    if host.kind == "container":
        return Fix(f"{act} on the machine that runs the container, and start the container with the GPU: "
                   "docker run --gpus all", "the NVIDIA Container Toolkit mounts the host's driver into the "
                   "container; nothing is installed in it")
    if host.kind == "wsl":
        return Fix(f"{act} on Windows", "WSL uses the Windows driver; never install a Linux driver inside WSL")
    if host.kind == "jetson":
        return Fix(f"{act}: flash a JetPack release whose L4T carries it", "a Jetson's GPU driver is part of L4T")
    if "ubuntu" in host.distribution:
        command = f"sudo apt install nvidia-driver-{version.split('.')[0]}" if version else "sudo ubuntu-drivers install"
        return Fix(f"{act} with Ubuntu's package: {command}, then reboot",
                   "the distribution's packages follow its kernels")
    return Fix(f"{act} from the distribution's packages (or NVIDIA's installer), then reboot")


def wheels(release: tuple[int, int], torch: str | None) -> str:
    """What a pip tree installs to run on CUDA `release`."""
    major, minor = release
    text = f"the CUDA {major} wheels ({wheel_for(f'libcudart.so.{major}')} and the other nvidia-*" + (
        f"-cu{major}" if major < 13 else "") + " wheels)"
    if torch:
        text += (f" and a torch built for CUDA {major}.{minor} or an older {major}.x: pip install \"torch=={torch}\" "
                 f"from PyTorch's cu{major}{minor} wheel index (or the nearest older cu{major}x one)")
    return text
