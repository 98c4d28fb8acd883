"""The driver checks: the host's kind, the driver library the target would
load (through a driver directory in its runpath in a Nix store, the host's
directories in a tree), and the user-space driver against the kernel module.

Takes: the Page (page.py) with the Host, a target's TargetFacts. Gives: the
host-kind, driver-library and kernel-module checks on the page.
"""

from __future__ import annotations

from ...cuda.driver import needs, parse_version
from ...host.probe import NIXOS_DRIVER_DIR, Host
from .facts import Fix, TargetFacts
from .fixes import driver_fix
from .page import Page


def host_kind(page: Page) -> None:
    h = page.host
    root = "" if h.root == "/" else f" (under {h.root})"
    page.line("host", f"{h.description}{root}")

def target_driver(page: Page, target: TargetFacts) -> tuple[bool, str | None]:
    """The target's own defects in loading the driver, whatever the host:
    (whether one decided the line, the version the target loads)."""
    d = page.host.driver
    if target.compat is not None:
        path, version = target.compat
        page.line("driver-library", f"{path}: cuda_compat's user-space driver {version or '(version unknown)'}, "
                  "forward compatibility over the host's kernel module")
        return True, version
    if target.driver.bundled:
        page.line("driver-library", f"the target loads {target.driver.bundled[0]} instead of the host's driver, "
                  "a stub that reports no GPU", rule="driver-unreachable", file=target.driver.bundled[0],
                  fixes=[Fix("remove the stubs directory from the runpath (autoAddOpenGLRunpathHook replaces "
                             "it with the driver directory)")])
        return True, None
    without = target.driver.without
    if without and page.host.env_driver is None:
        shell = [Fix(f"for one shell: export LD_LIBRARY_PATH={_dir(d.path)}",
                     "every library in that directory goes ahead of the closure's own")] if d else []
        page.line("driver-library", f"{without[0]} loads libcuda.so.1 but has no driver directory in its "
                  f"runpath{_more(without)}, so it finds no driver on any host (missing-driver-runpath)",
                  rule="driver-unreachable", file=without[0],
                  fixes=[Fix("rebuild it with autoAddOpenGLRunpathHook in nativeBuildInputs",
                             "fixes it for every host; a rebuild")] + shell)
        return True, d.version if d else None
    return False, None

def driver_library(page: Page, target: TargetFacts | None) -> str | None:
    """The driver library the target (or, without one, a Nix program) would
    load; returns its version when known."""
    h = page.host
    d = h.driver
    if target is not None:
        decided, version = target_driver(page, target)
        if decided and (d is not None or target.compat is not None):
            return version
    if d is None:
        if not any(c.rule == "driver-missing" for c in page.checks):  # a line about the host: said once
            where = ", ".join(h.driver_dirs[:4]) + (", ..." if len(h.driver_dirs) > 4 else "")
            own = needs(target.release) if target is not None and target.release else (None, None)
            page.prefix, prefix = "", page.prefix
            page.line("driver-library", f"no NVIDIA driver library (libcuda.so.1) on this host (looked in "
                      f"{where})", rule="driver-missing", fixes=[driver_fix(h, own[0] or own[1])])
            page.prefix = prefix
        return None
    found = f"{d.path}" + (f" -> {d.real}" if d.real != d.path else "")
    if target is not None and not target.nix:
        n = len(target.driver.objects)
        who = f"{n} object{'s' * (n != 1)} of the target load" if n else "the target's programs would load"
        page.line("driver-library", f"{who} the host's driver: {found}")
        return d.version
    if target is None:
        if h.kind == "nixos" or d.path.startswith(NIXOS_DRIVER_DIR):
            page.line("driver-library", f"driver at {found}")
        elif h.nix_driver or h.env_driver:
            page.line("driver-library", f"driver at {found}; Nix programs find it {_nix_way(h)}")
        else:
            page.line("driver-library", f"the host keeps its driver at {found}; Nix programs look in "
                      f"{NIXOS_DRIVER_DIR}, which this host does not have", rule="no-driver-directory",
                      fixes=_reach_fixes(_dir(d.path), h))
        return d.version
    use = target.driver
    if not use.objects:
        page.line("driver-library", f"no object of the target loads libcuda.so.1; the host's driver is at {found}")
        return d.version
    reached = use.reached
    if reached or h.env_driver:
        # LD_LIBRARY_PATH goes ahead of every runpath.
        way = _nix_way(h) if h.env_driver else f"through {reached[0]}"
        page.line("driver-library", f"the target's {len(use.objects)} object{'s' * (len(use.objects) != 1)} "
                  f"loading libcuda.so.1 find it {way}: {found}")
        return d.version
    page.line("driver-library", f"the target finds the driver only through {', '.join(use.driver_dirs)}, which "
              f"this host does not have; the host's driver is at {found}", rule="driver-unreachable",
              fixes=_reach_fixes(_dir(d.path), h))
    return d.version

def kernel_module(page: Page, user: str | None, compat: bool) -> None:
    h = page.host
    if h.kind == "wsl":
        page.line("kernel-module", "WSL: the Windows driver serves the GPU; there is no Linux kernel module")
        return
    if h.kernel_module is None:
        if h.driver is None:
            return  # already an error: no driver at all
        if h.kind == "jetson":
            page.line("kernel-module", f"Jetson: the GPU driver is part of L4T {h.tegra_release}")
            return
        page.line("kernel-module", "the NVIDIA kernel module is not loaded (no /proc/driver/nvidia/version)",
                  rule="driver-missing", file="/proc/driver/nvidia/version",
                  fixes=[Fix("load it: sudo modprobe nvidia (after installing or upgrading the driver: reboot)")]
                  + ([driver_fix(h, None)] if h.kind == "nixos" else []))
        return
    if user is None:
        page.line("kernel-module", f"kernel module {h.kernel_module}; the user-space driver's version is unknown "
                  "(neither its file name nor its strings say)", rule="driver-version-unknown",
                  file=h.driver.real if h.driver else "")
        return
    if compat or parse_version(user) == parse_version(h.kernel_module):
        note = " (forward compatibility: they may differ)" if compat and user != h.kernel_module else ""
        page.line("kernel-module", f"user-space driver {user}, kernel module {h.kernel_module}{note}")
        return
    page.line("kernel-module", f"user-space driver {user} but kernel module {h.kernel_module}: the driver was "
              "changed and the old module is still loaded, so CUDA fails to initialise "
              "(cudaErrorSystemDriverMismatch)", rule="driver-kernel-mismatch",
              file="/proc/driver/nvidia/version", user_version=user, kernel_version=h.kernel_module,
              fixes=[Fix(f"reboot, so the kernel loads the {user} module"),
                     Fix(f"or switch back to the {h.kernel_module} driver (NixOS: boot the previous "
                         "generation, or pin hardware.nvidia.package)")])


def _reach_fixes(driver_dir: str, host: Host) -> list[Fix]:
    """The ways a Nix program reaches a driver kept in `driver_dir`."""
    return [
        Fix("run each program through nix-gl-host: nixglhost PROGRAM (or nixGL: nixGLNvidia PROGRAM)",
            "nix-gl-host copies only the driver's libraries from the host and follows driver upgrades; nixGL "
            "builds the driver of the host's exact version from NVIDIA's download (--impure) and must be "
            "rebuilt after every driver upgrade; both wrap each program"),
        Fix(f"link the driver's libraries into a driver directory: sudo mkdir -p {NIXOS_DRIVER_DIR} && "
            f"sudo ln -sf {driver_dir}/libcuda.so* {driver_dir}/libnvidia-*.so* {NIXOS_DRIVER_DIR}/",
            "every Nix program then finds the driver as on NixOS, no wrapper; needs root, and /run is emptied "
            "at boot (repeat it from a systemd-tmpfiles rule); links only the driver, never the whole directory"),
        Fix(f"for one shell: export LD_LIBRARY_PATH={driver_dir}",
            f"quickest, but every library in {driver_dir} then goes ahead of the closure's own, so a host "
            f"libstdc++ or libz can break Nix programs; lasts for that shell only"),
    ]


def _nix_way(host: Host) -> str:
    """How a Nix program finds the driver without a driver directory of its own."""
    if host.env_driver:
        return f"through LD_LIBRARY_PATH ({host.env_driver}, for this shell only)"
    return f"in {NIXOS_DRIVER_DIR} ({host.nix_driver})"


def _dir(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _more(items: list) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""
