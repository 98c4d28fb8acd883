"""Judge whether CUDA programs of a target will run on a host: one check per
line, each ok, warning or error, and for each problem the exact fixes with
their trade-offs (docs/doctor.md).

The checks, in order: the host's kind; the driver library the target would
load (as the loader model resolves it: through a driver directory in the
runpath in a Nix store, the host's directories in a tree); the user-space
driver's version against the kernel module's; the driver against what the
target's CUDA runtime needs; the GPUs and whether the target's GPU code runs
on each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..gpu.code import capability_table, runs_on
from ..gpu.driver import at_least, needs, parse_version
from ..host.probe import NIXOS_DRIVER_DIR, Host
from .collector import Findings
from .gpu import Kernels, verdict

OK, WARNING, ERROR, INFO = "ok", "warning", "error", "info"


@dataclass
class Fix:
    text: str  # what to do, commands included
    trade_off: str | None = None

    def to_json(self) -> dict:
        return {"text": self.text, "trade_off": self.trade_off}


@dataclass
class Check:
    check: str  # host, driver-library, kernel-module, cuda-runtime, gpus, gpu-code
    status: str  # ok, info, warning or error
    message: str
    fixes: list[Fix] = field(default_factory=list)
    rule: str | None = None

    def to_json(self) -> dict:
        return {"check": self.check, "status": self.status, "message": self.message, "rule": self.rule,
                "fixes": [f.to_json() for f in self.fixes]}


@dataclass
class DriverUse:
    """How the target's objects that load the driver would find it."""

    objects: list[str]  # objects that need or open libcuda
    driver_dirs: list[str]  # driver directories on their search paths (nix-store mode), in order
    without: list[str]  # objects with no driver directory on their search path (nix-store mode)
    bundled: list[str]  # libcuda files inside the target their search reaches first (a stub)
    reached: list[str]  # of driver_dirs, those that hold libcuda.so.1 on the host


@dataclass
class TargetFacts:
    """What the doctor needs to know of a target, read and resolved by the audit."""

    targets: list[str]
    mode: str
    driver: DriverUse
    runtimes: dict[tuple[int, int], str]  # CUDA runtime release -> the file that says so
    compat: tuple[str, str | None] | None  # cuda_compat's libcuda in the target: (path, version)
    gpu_code: dict[str, Kernels]  # file -> the GPU code it holds, with its kernels read on demand


def _reach_fixes(driver_dir: str, host: Host) -> list[Fix]:
    """The ways a Nix program reaches a driver kept in `driver_dir`."""
    return [
        Fix(f"run each program through nix-gl-host: nixglhost PROGRAM (or nixGL: nixGLNvidia PROGRAM)",
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


def _nixos_driver_fix() -> Fix:
    return Fix("enable the NVIDIA driver in configuration.nix: hardware.graphics.enable = true; "
               "services.xserver.videoDrivers = [ \"nvidia\" ]; then nixos-rebuild switch and reboot",
               "the NixOS way: the driver directory follows the system generation")


class DoctorJudge:
    def __init__(self, host: Host, findings: Findings):
        self.host = host
        self.findings = findings
        self.checks: list[Check] = []

    def line(self, check: str, message: str, rule: str | None = None, file: str = "", fixes=(), **fields):
        """Record a check; with a rule, also a finding whose severity (after the
        policy) is the check's status."""
        status = OK
        if rule is not None:
            status = self.findings.policy.severity_of(rule, self.findings.mode) or OK
            self.findings.add(rule, file or self.host.root, message,
                              fixes=[f.to_json() for f in fixes], **fields)
        self.checks.append(Check(check, status, message, list(fixes), rule))

    # -- checks ----------------------------------------------------------------

    def host_kind(self) -> None:
        h = self.host
        root = "" if h.root == "/" else f" (under {h.root})"
        self.line("host", f"{h.description}{root}")

    def driver_library(self, target: TargetFacts | None) -> str | None:
        """The driver library the target (or, without one, a Nix program) would
        load; returns its version when known."""
        h = self.host
        d = h.driver
        if target is not None and target.compat is not None:
            path, version = target.compat
            self.line("driver-library", f"{path}: cuda_compat's user-space driver {version or '(version unknown)'}, "
                      "forward compatibility over the host's kernel module")
            return version
        if target is not None and target.driver.bundled:
            self.line("driver-library", f"the target loads {target.driver.bundled[0]} instead of the host's driver, "
                      "a stub that reports no GPU", rule="driver-unreachable", file=target.driver.bundled[0],
                      fixes=[Fix("remove the stubs directory from the runpath (autoAddOpenGLRunpathHook replaces "
                                 "it with the driver directory)")])
            return None
        if d is None:
            where = ", ".join(h.driver_dirs[:4]) + (", ..." if len(h.driver_dirs) > 4 else "")
            fixes = [_nixos_driver_fix()] if h.kind == "nixos" else [
                Fix("install the NVIDIA driver with the distribution's packages and reboot")]
            if h.kind == "container":
                fixes = [Fix("start the container with the GPU: docker run --gpus all (the NVIDIA Container "
                             "Toolkit mounts the host's driver into it)")]
            self.line("driver-library", f"no NVIDIA driver library (libcuda.so.1) on this host (looked in {where})",
                      rule="driver-missing", fixes=fixes)
            return None
        found = f"{d.path}" + (f" -> {d.real}" if d.real != d.path else "")
        if target is not None and target.mode == "tree":
            n = len(target.driver.objects)
            who = f"{n} object{'s' * (n != 1)} of the target load" if n else "the target's programs would load"
            self.line("driver-library", f"{who} the host's driver: {found}")
            return d.version
        if target is None:
            if h.kind == "nixos" or d.path.startswith(NIXOS_DRIVER_DIR):
                self.line("driver-library", f"driver at {found}")
            else:
                self.line("driver-library", f"the host keeps its driver at {found}; Nix programs look in "
                          f"{NIXOS_DRIVER_DIR}, which this host does not have", rule="no-driver-directory",
                          fixes=_reach_fixes(_dir(d.path), h))
            return d.version
        use = target.driver
        if not use.objects:
            self.line("driver-library", f"no object of the target loads libcuda.so.1; the host's driver is at {found}")
            return d.version
        if use.without:
            self.line("driver-library", f"{use.without[0]} loads libcuda.so.1 but has no driver directory in its "
                      f"runpath{_more(use.without)}, so it finds no driver on any host (missing-driver-runpath)",
                      rule="driver-unreachable", file=use.without[0],
                      fixes=[Fix("rebuild it with autoAddOpenGLRunpathHook in nativeBuildInputs",
                                 "fixes it for every host; a rebuild"),
                             Fix(f"for one shell: export LD_LIBRARY_PATH={_dir(d.path)}",
                                 "every library in that directory goes ahead of the closure's own")])
            return d.version
        reached = use.reached
        if reached:
            self.line("driver-library", f"the target's {len(use.objects)} object{'s' * (len(use.objects) != 1)} "
                      f"loading libcuda.so.1 find it through {reached[0]}: {found}")
            return d.version
        self.line("driver-library", f"the target finds the driver only through {', '.join(use.driver_dirs)}, which "
                  f"this host does not have; the host's driver is at {found}", rule="driver-unreachable",
                  fixes=_reach_fixes(_dir(d.path), h))
        return d.version

    def kernel_module(self, user: str | None, compat: bool) -> None:
        h = self.host
        if h.kind == "wsl":
            self.line("kernel-module", "WSL: the Windows driver serves the GPU; there is no Linux kernel module")
            return
        if h.kernel_module is None:
            if h.driver is None:
                return  # already an error: no driver at all
            if h.kind == "jetson":
                self.line("kernel-module", f"Jetson: the GPU driver is part of L4T {h.tegra_release}")
                return
            self.line("kernel-module", "the NVIDIA kernel module is not loaded (no /proc/driver/nvidia/version)",
                      rule="driver-missing", file="/proc/driver/nvidia/version",
                      fixes=[Fix("load it: sudo modprobe nvidia (after installing or upgrading the driver: reboot)")]
                      + ([_nixos_driver_fix()] if h.kind == "nixos" else []))
            return
        if user is None:
            self.line("kernel-module", f"kernel module {h.kernel_module}; the user-space driver's version is unknown "
                      "(neither its file name nor its strings say)", rule="driver-version-unknown",
                      file=h.driver.real if h.driver else "")
            return
        if compat or parse_version(user) == parse_version(h.kernel_module):
            note = " (forward compatibility: they may differ)" if compat and user != h.kernel_module else ""
            self.line("kernel-module", f"user-space driver {user}, kernel module {h.kernel_module}{note}")
            return
        self.line("kernel-module", f"user-space driver {user} but kernel module {h.kernel_module}: the driver was "
                  "changed and the old module is still loaded, so CUDA fails to initialise "
                  "(cudaErrorSystemDriverMismatch)", rule="driver-kernel-mismatch",
                  file="/proc/driver/nvidia/version", user_version=user, kernel_version=h.kernel_module,
                  fixes=[Fix(f"reboot, so the kernel loads the {user} module"),
                         Fix(f"or switch back to the {h.kernel_module} driver (NixOS: boot the previous "
                             "generation, or pin hardware.nvidia.package)")])

    def cuda_runtime(self, target: TargetFacts | None, user: str | None) -> None:
        if target is None:
            return
        if not target.runtimes:
            self.line("cuda-runtime", "no CUDA runtime found in the target")
            return
        runtime = max(target.runtimes)
        evidence = target.runtimes[runtime]
        release = f"CUDA {runtime[0]}.{runtime[1]}"
        own, floor = needs(runtime)
        if user is None:
            self.line("cuda-runtime", f"{release} ({evidence}) needs driver {own or floor} or newer; the driver's "
                      "version is unknown", rule="driver-version-unknown", file=evidence)
            return
        upgrade = Fix(f"upgrade the driver to {own or floor} or newer (NixOS: hardware.nvidia.package = "
                      "config.boot.kernelPackages.nvidiaPackages.production, or .latest)")
        older = Fix(f"or build the target against an older CUDA (cudaPackages_12_x) whose minimum driver {user} "
                    "meets", "a rebuild; newer GPUs may need the newer CUDA")
        compat = Fix("or, on a data-center GPU or a Jetson, forward compatibility: cudaPackages.cuda_compat's "
                     "libcuda ahead of the driver directory (nixpkgs does this on Jetson)",
                     "only some GPUs and kernel-module branches (NVIDIA's compatibility matrix)")
        if floor and not at_least(user, floor):
            self.line("cuda-runtime", f"{release} ({evidence}) needs driver {floor} or newer (minor version "
                      f"compatibility; {own} for everything); the driver is {user}: nothing will run "
                      "(cudaErrorInsufficientDriver)", rule="driver-too-old", file=evidence, runtime=f"{runtime[0]}.{runtime[1]}",
                      needs=floor, driver=user, fixes=[upgrade, older, compat])
        elif own and not at_least(user, own):
            self.line("cuda-runtime", f"{release} ({evidence}) runs on driver {user} through minor version "
                      f"compatibility only: PTX newer than the driver cannot be JIT-compiled; {own} or newer for "
                      "everything", rule="driver-minor-compat", file=evidence, runtime=f"{runtime[0]}.{runtime[1]}",
                      needs=own, driver=user, fixes=[upgrade])
        else:
            self.line("cuda-runtime", f"{release} ({evidence}) needs driver {own or floor}; the driver is {user}")

    def gpus(self) -> list[tuple[str, tuple[int, int]]]:
        h = self.host
        if not h.gpus:
            why = f"nvidia-smi failed: {h.smi_error}" if h.smi_error else (
                "no nvidia-smi on PATH and no /proc/driver/nvidia/gpus" if h.smi is None else "nvidia-smi lists none")
            self.line("gpus", f"no NVIDIA GPU found ({why})", rule="gpu-not-found",
                      fixes=[Fix("check that the GPU is seen: lspci | grep -i nvidia; in a container, start it "
                                 "with --gpus all")])
            return []
        out = []
        for i, g in enumerate(h.gpus):
            if g.capability is None:
                self.line("gpus", f"GPU {i}: {g.name}, compute capability unknown ({g.source})",
                          rule="gpu-capability-unknown", file=g.source)
                continue
            major, minor = (int(x) for x in g.capability.split("."))
            self.line("gpus", f"GPU {i}: {g.name}, compute capability {g.capability} ({g.source})")
            out.append((f"GPU {i} ({g.name}, {g.capability})", (major, minor)))
        return out

    def gpu_code(self, target: TargetFacts | None, devices: list[tuple[str, tuple[int, int]]]) -> None:
        if target is None or not devices:
            return
        files = {f: k.codes() for f, k in target.gpu_code.items() if k.groups}
        if not files:
            self.line("gpu-code", "the target holds no GPU code")
            return
        runtime = max(target.runtimes) if target.runtimes else None
        for label, device in devices:
            cap = f"{device[0]}.{device[1]}"
            how = {f: verdict(target.gpu_code[f], codes, device, runs_on) for f, codes in files.items()}
            none = sorted(f for f, (v, _) in how.items() if v == "missing")
            jit = sorted(f for f, (v, _) in how.items() if v == "jit")
            if none:
                example = files[none[0]]
                have = ", ".join(sorted({c.name for c in example if c.kind != "lto"}))
                self.line("gpu-code", f"{label}: nothing in {len(none)} of {len(files)} files with GPU code runs on "
                          f"it ({none[0]} has {have}): CUDA fails with \"no kernel image is available for "
                          "execution on the device\"", rule="no-kernel-image", file=none[0], capability=cap,
                          files=none, fixes=self._arch_fixes(cap, runtime))
            elif jit:
                ptx = max(how[jit[0]][1], key=lambda c: (c.major, c.minor))
                self.line("gpu-code", f"{label}: {len(jit)} of {len(files)} files run on it only by JIT-compiling "
                          f"PTX ({ptx.name}) at first start ({jit[0]})", rule="jit-only-gpu-arch", file=jit[0], capability=cap, ptx=ptx.name,
                          fixes=self._arch_fixes(cap, runtime)[:1])
            else:
                idle = sum(1 for v, _ in how.values() if v == "idle")
                self.line("gpu-code", f"{label}: every one of {len(files) - idle} files with GPU kernels has a cubin "
                          f"for it" + (f" ({idle} more hold GPU code that defines no kernel)" if idle else ""))

    @staticmethod
    def _arch_fixes(cap: str, runtime: tuple[int, int] | None) -> list[Fix]:
        entry = capability_table().get(cap, {})
        last = entry.get("last")
        setting = f'cudaCapabilities = [ "{cap}" ] in the nixpkgs config (beside the others you need)'
        if last and runtime and parse_version(last) < runtime:
            set_name = f"cudaPackages_{last.replace('.', '_')}"
            return [Fix(f"CUDA {runtime[0]}.{runtime[1]} no longer builds for {cap} (the last that does is CUDA "
                        f"{last}): build with {set_name} and {setting}", "an older CUDA release")]
        return [Fix(f"rebuild with {setting}", "more GPU code: a larger closure and a longer build")]


def _dir(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _more(items: list) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


def judge_doctor(host: Host, target: TargetFacts | None, findings: Findings) -> list[Check]:
    judge = DoctorJudge(host, findings)
    judge.host_kind()
    user = judge.driver_library(target)
    if user is None and host.driver is not None and (target is None or target.compat is None):
        user = host.driver.version
    judge.kernel_module(user, compat=target is not None and target.compat is not None)
    judge.cuda_runtime(target, user)
    devices = judge.gpus()
    judge.gpu_code(target, devices)
    return judge.checks
