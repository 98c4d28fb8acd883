"""Judge whether CUDA programs of a target will run on a host: one check per
line, each ok, warning or error, and for each problem the exact fixes with
their trade-offs (docs/commands/doctor.md).

The checks, in order: the host's kind; the driver library the target would
load (as the loader model resolves it: through a driver directory in the
runpath in a Nix store, the host's directories in a tree); the user-space
driver's version against the kernel module's; the driver against what the
target's CUDA runtime needs; the GPUs and whether the target's GPU code runs
on each. What they judge of a target (TargetFacts) ops/doctor.py gathers:
nothing here reads the disk.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from ..cuda.libraries import wheel_for
from ..cuda.code import capability_table, runs_on
from ..cuda.driver import TOOLKIT_DRIVER, at_least, needs, parse_version
from ..cuda.release import Need, highest
from ..host.probe import NIXOS_DRIVER_DIR, Host
from .rules import INFO
from .collector import Findings
from .gpu import Kernels, verdict

OK = "ok"  # a check that found nothing wrong; the other statuses are severities
HOST_ABSENT = ("driver-missing", "gpu-not-found")  # what a host lacks, not what a target gets wrong


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
    _: KW_ONLY
    fixes: list[Fix] = field(default_factory=list)
    rule: str | None = None
    evidence: list[Need] | None = None  # cuda-runtime: what tells the CUDA release the target needs

    def to_json(self) -> dict:
        out = {"check": self.check, "status": self.status, "message": self.message, "rule": self.rule,
               "fixes": [f.to_json() for f in self.fixes]}
        if self.evidence is not None:
            out["evidence"] = [n.to_json() for n in self.evidence]
        return out


@dataclass(kw_only=True)
class DriverUse:
    """How the target's objects that load the driver would find it."""

    objects: list[str]  # objects that need or open libcuda
    driver_dirs: list[str]  # driver directories on their search paths (nix-store mode), in order
    without: list[str]  # objects with no driver directory on their search path (nix-store mode)
    bundled: list[str]  # libcuda files inside the target their search reaches first (a stub)
    reached: list[str]  # of driver_dirs, those that hold libcuda.so.1 on the host


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetFacts:
    """What the doctor needs to know of a target, read and resolved by the
    audit (ops/doctor.py gathers it)."""

    targets: list[str]
    mode: str
    driver: DriverUse
    needs: list[Need]  # every piece of evidence of the CUDA release the target needs
    runtime_missing: dict[str, str]  # libcudart.so.N needed but found nowhere -> an object that needs it
    compat: tuple[str, str | None] | None  # cuda_compat's libcuda in the target: (path, version)
    gpu_code: dict[str, Kernels]  # file -> the GPU code it holds, the kernels judging needs read
    torch: str | None = None  # the version of the torch wheel in a tree

    @property
    def nix(self) -> bool:
        return self.mode == "nix-store"

    @property
    def release(self) -> tuple[int, int] | None:
        need = highest(self.needs)
        return need.release if need else None

    @property
    def uses_cuda(self) -> bool:  # loads the driver, names a CUDA release, needs a runtime or holds GPU code
        return bool(self.driver.objects or self.driver.bundled or self.needs or self.runtime_missing
                    or self.compat or any(k.groups for k in self.gpu_code.values()))


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


def _driver_fix(host: Host, version: str | None, upgrade: bool = False) -> Fix:
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


def _wheels(release: tuple[int, int], torch: str | None) -> str:
    """What a pip tree installs to run on CUDA `release`."""
    major, minor = release
    text = f"the CUDA {major} wheels ({wheel_for(f'libcudart.so.{major}')} and the other nvidia-*" + (
        f"-cu{major}" if major < 13 else "") + " wheels)"
    if torch:
        text += (f" and a torch built for CUDA {major}.{minor} or an older {major}.x: pip install \"torch=={torch}\" "
                 f"from PyTorch's cu{major}{minor} wheel index (or the nearest older cu{major}x one)")
    return text


def _newest_release(driver: str) -> tuple[int, int] | None:
    """The newest CUDA release whose own minimum `driver` meets."""
    return max((r for r, v in TOOLKIT_DRIVER.items() if at_least(driver, v)), default=None)


def _older_cuda_fix(target: "TargetFacts", driver: str) -> Fix | None:
    rel = _newest_release(driver)
    if rel is None:
        return None
    why = f"CUDA {rel[0]}.{rel[1]} is the newest release driver {driver} runs fully (it needs {TOOLKIT_DRIVER[rel]})"
    if target.nix:
        return Fix(f"or rebuild the target with cudaPackages_{rel[0]}_{rel[1]}: {why}",
                   "a rebuild; newer GPUs may need the newer CUDA")
    return Fix(f"or install builds for CUDA {rel[0]}.{rel[1]} instead: {_wheels(rel, target.torch)}; {why}",
               "older CUDA libraries; newer GPUs may need the newer CUDA")


class DoctorJudge:
    def __init__(self, host: Host, findings: Findings):
        self.host = host
        self.findings = findings
        self.checks: list[Check] = []
        self.prefix = ""  # with several groups of targets, the group each line is about
        self.cuda = True  # whether CUDA programs are asked about: the host alone, or a target that uses CUDA

    def line(self, check: str, message: str, rule: str | None = None, file: str = "", fixes=(),
             evidence: list[Need] | None = None, **fields):
        """Record a check; with a rule, also a finding whose severity (after the
        policy, and at most info for a host's lack no target suffers) is the check's status."""
        status, at_most = OK, None
        if rule in HOST_ABSENT and not self.cuda:
            at_most, message = INFO, f"{message}; no target uses CUDA"
        message = self.prefix + message
        if rule is not None:
            status = self.findings.severity_of(rule, at_most) or OK
            if evidence is not None:
                fields["evidence"] = [n.to_json() for n in evidence]
            self.findings.add(rule, file or self.host.root, message, at_most=at_most,
                              fixes=[f.to_json() for f in fixes], **fields)
        self.checks.append(Check(check, status, message, fixes=list(fixes), rule=rule, evidence=evidence))

    # -- checks ----------------------------------------------------------------

    def host_kind(self) -> None:
        h = self.host
        root = "" if h.root == "/" else f" (under {h.root})"
        self.line("host", f"{h.description}{root}")

    def target_driver(self, target: TargetFacts) -> tuple[bool, str | None]:
        """The target's own defects in loading the driver, whatever the host:
        (whether one decided the line, the version the target loads)."""
        d = self.host.driver
        if target.compat is not None:
            path, version = target.compat
            self.line("driver-library", f"{path}: cuda_compat's user-space driver {version or '(version unknown)'}, "
                      "forward compatibility over the host's kernel module")
            return True, version
        if target.driver.bundled:
            self.line("driver-library", f"the target loads {target.driver.bundled[0]} instead of the host's driver, "
                      "a stub that reports no GPU", rule="driver-unreachable", file=target.driver.bundled[0],
                      fixes=[Fix("remove the stubs directory from the runpath (autoAddOpenGLRunpathHook replaces "
                                 "it with the driver directory)")])
            return True, None
        without = target.driver.without
        if without and self.host.env_driver is None:
            shell = [Fix(f"for one shell: export LD_LIBRARY_PATH={_dir(d.path)}",
                         "every library in that directory goes ahead of the closure's own")] if d else []
            self.line("driver-library", f"{without[0]} loads libcuda.so.1 but has no driver directory in its "
                      f"runpath{_more(without)}, so it finds no driver on any host (missing-driver-runpath)",
                      rule="driver-unreachable", file=without[0],
                      fixes=[Fix("rebuild it with autoAddOpenGLRunpathHook in nativeBuildInputs",
                                 "fixes it for every host; a rebuild")] + shell)
            return True, d.version if d else None
        return False, None

    def driver_library(self, target: TargetFacts | None) -> str | None:
        """The driver library the target (or, without one, a Nix program) would
        load; returns its version when known."""
        h = self.host
        d = h.driver
        if target is not None:
            decided, version = self.target_driver(target)
            if decided and (d is not None or target.compat is not None):
                return version
        if d is None:
            if not any(c.rule == "driver-missing" for c in self.checks):  # a line about the host: said once
                where = ", ".join(h.driver_dirs[:4]) + (", ..." if len(h.driver_dirs) > 4 else "")
                own = needs(target.release) if target is not None and target.release else (None, None)
                self.prefix, prefix = "", self.prefix
                self.line("driver-library", f"no NVIDIA driver library (libcuda.so.1) on this host (looked in "
                          f"{where})", rule="driver-missing", fixes=[_driver_fix(h, own[0] or own[1])])
                self.prefix = prefix
            return None
        found = f"{d.path}" + (f" -> {d.real}" if d.real != d.path else "")
        if target is not None and not target.nix:
            n = len(target.driver.objects)
            who = f"{n} object{'s' * (n != 1)} of the target load" if n else "the target's programs would load"
            self.line("driver-library", f"{who} the host's driver: {found}")
            return d.version
        if target is None:
            if h.kind == "nixos" or d.path.startswith(NIXOS_DRIVER_DIR):
                self.line("driver-library", f"driver at {found}")
            elif h.nix_driver or h.env_driver:
                self.line("driver-library", f"driver at {found}; Nix programs find it {_nix_way(h)}")
            else:
                self.line("driver-library", f"the host keeps its driver at {found}; Nix programs look in "
                          f"{NIXOS_DRIVER_DIR}, which this host does not have", rule="no-driver-directory",
                          fixes=_reach_fixes(_dir(d.path), h))
            return d.version
        use = target.driver
        if not use.objects:
            self.line("driver-library", f"no object of the target loads libcuda.so.1; the host's driver is at {found}")
            return d.version
        reached = use.reached
        if reached or h.env_driver:
            # LD_LIBRARY_PATH goes ahead of every runpath.
            way = _nix_way(h) if h.env_driver else f"through {reached[0]}"
            self.line("driver-library", f"the target's {len(use.objects)} object{'s' * (len(use.objects) != 1)} "
                      f"loading libcuda.so.1 find it {way}: {found}")
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
                      + ([_driver_fix(h, None)] if h.kind == "nixos" else []))
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

    def cuda_runtime(self, target: TargetFacts, user: str | None) -> None:
        for name, file in target.runtime_missing.items():
            wheel = None if target.nix else wheel_for(name)
            where = "is not in the closure" if target.nix else "neither the target nor the host holds"
            fix = (Fix("add the CUDA runtime to the package's inputs: cudaPackages.cuda_cudart (its lib output)")
                   if target.nix else Fix(f"pip install \"{wheel}\"", "the runtime NVIDIA ships as a wheel, "
                                          "found by the tree's own runpaths"))
            self.line("cuda-runtime", f"{file} needs {name}, which {where}: the program fails to start",
                      rule="cuda-runtime-missing", file=file, needed=name, wheel=wheel, fixes=[fix])
        need = highest(target.needs)
        if need is None:
            if not target.runtime_missing:
                self.line("cuda-runtime", "the target names no CUDA release: no CUDA library, CUDA wheel or torch "
                          "built for CUDA", evidence=[])
            return
        runtime = need.release
        evidence = _distinct(target.needs)
        others = len(evidence) - 1
        where = "" if need.file.endswith("/" + need.source.split()[-1]) else f" in {need.file}"
        release = (f"CUDA {need.label} (from {need.source}{where}"
                   + (f"; {others} more piece{'s' * (others != 1)} of evidence" if others else "") + ")")
        own, floor = needs(runtime)
        if user is None:
            if self.host.driver is None:
                self.line("cuda-runtime", f"{release} needs driver {own or floor} or newer; this host has none",
                          evidence=evidence)
                return
            self.line("cuda-runtime", f"{release} needs driver {own or floor} or newer; the driver's "
                      "version is unknown", rule="driver-version-unknown", file=need.file, evidence=evidence)
            return
        upgrade = _driver_fix(self.host, own or floor, upgrade=True)
        fields = {"runtime": f"{runtime[0]}.{runtime[1]}", "driver": user, "evidence": evidence}
        if floor and not at_least(user, floor):
            fixes = [upgrade, _older_cuda_fix(target, user), self._compat_fix(target, runtime)]
            self.line("cuda-runtime", f"{release} needs driver {floor} or newer (minor version compatibility; "
                      f"{own} for everything); the driver is {user}: nothing will run (cudaErrorInsufficientDriver)",
                      rule="driver-too-old", file=need.file, needs=floor, fixes=[f for f in fixes if f], **fields)
        elif own and not at_least(user, own):
            self.line("cuda-runtime", f"{release} runs on driver {user} through minor version compatibility only: "
                      f"PTX newer than the driver cannot be JIT-compiled; {own} or newer for everything",
                      rule="driver-minor-compat", file=need.file, needs=own, fixes=[upgrade], **fields)
        else:
            self.line("cuda-runtime", f"{release} needs driver {own or floor}; the driver is {user}",
                      evidence=evidence)

    @staticmethod
    def _compat_fix(target: TargetFacts, runtime: tuple[int, int]) -> Fix:
        terms = ("only some GPUs and kernel-module branches (NVIDIA's compatibility matrix)")
        if target.nix:
            return Fix("or, on a data-center GPU or a Jetson, forward compatibility: cudaPackages.cuda_compat's "
                       "libcuda ahead of the driver directory (nixpkgs does this on Jetson)", terms)
        return Fix(f"or, on a data-center GPU, forward compatibility: NVIDIA's cuda-compat-{runtime[0]}-{runtime[1]} "
                   f"package, with LD_LIBRARY_PATH=/usr/local/cuda-{runtime[0]}.{runtime[1]}/compat", terms)

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
            if g.model_capability is not None and g.model_capability != g.capability:
                self.line("gpus", f"GPU {i}: {g.name}, compute capability {g.capability} ({g.source}); the model "
                          f"table gives {g.model_capability} for {g.model!r} ({g.model_source}): {g.source}'s "
                          f"{g.capability} is used", rule="gpu-capability-mismatch", file=g.model_source or "",
                          capability=g.capability, model_capability=g.model_capability)
            else:
                self.line("gpus", f"GPU {i}: {g.name}, compute capability {g.capability} ({g.source})")
            out.append((f"GPU {i} ({g.name}, {g.capability})", g.device))
        return out

    def gpu_code(self, target: TargetFacts, devices: list[tuple[str, tuple[int, int]]]) -> None:
        if not devices:
            return
        files = {f: k.codes() for f, k in target.gpu_code.items() if k.groups}
        if not files:
            self.line("gpu-code", "the target holds no GPU code")
            return
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
                          files=none, fixes=self._arch_fixes(cap, target))
            elif jit:
                ptx = max(how[jit[0]][1], key=lambda c: (c.major, c.minor))
                self.line("gpu-code", f"{label}: {len(jit)} of {len(files)} files run on it only by JIT-compiling "
                          f"PTX ({ptx.name}) at first start ({jit[0]})", rule="jit-only-gpu-arch", file=jit[0],
                          capability=cap, ptx=ptx.name, fixes=self._arch_fixes(cap, target)[:1])
            else:
                idle = sum(1 for v, _ in how.values() if v == "idle")
                self.line("gpu-code", f"{label}: every one of {len(files) - idle} files with GPU kernels has a cubin "
                          f"for it" + (f" ({idle} more hold GPU code that defines no kernel)" if idle else ""))

    @staticmethod
    def _arch_fixes(cap: str, target: TargetFacts) -> list[Fix]:
        """How to get GPU code for `cap`: in the Nix way for a store path, in
        the pip way for a tree; from an older CUDA when the target's no longer
        builds for it."""
        runtime = target.release
        last = capability_table().get(cap, {}).get("last")
        too_new = bool(last and runtime and parse_version(last) < runtime)
        sm = f"sm_{cap.replace('.', '')}"
        if target.nix:
            setting = f'cudaCapabilities = [ "{cap}" ] in the nixpkgs config (beside the others you need)'
            if too_new:
                return [Fix(f"CUDA {runtime[0]}.{runtime[1]} no longer builds for {cap} (the last that does is CUDA "
                            f"{last}): build with cudaPackages_{last.replace('.', '_')} and {setting}",
                            "an older CUDA release")]
            return [Fix(f"rebuild with {setting}", "more GPU code: a larger closure and a longer build")]
        if too_new:
            old = parse_version(last)
            return [Fix(f"CUDA {runtime[0]}.{runtime[1]} no longer builds for {cap} (the last that does is CUDA "
                        f"{last}): install {_wheels((old[0], old[1]), target.torch)}, with {sm} code",
                        "an older CUDA release")]
        return [Fix(f"install a build with {sm} code (for PyTorch: one whose torch.cuda.get_arch_list() has {sm}, "
                    f"an older sm_{cap.split('.')[0]}x, or PTX at or below it), or build it from source with "
                    f"TORCH_CUDA_ARCH_LIST=\"{cap}\"", "more GPU code: larger wheels, or a long build")]


def _distinct(evidence: list[Need]) -> list[Need]:
    """One piece of evidence per release and source, highest first (the
    same soname is needed by many objects)."""
    seen: set[tuple] = set()
    out = []
    for n in sorted(evidence, key=lambda n: (n.release, n.exact), reverse=True):
        if (n.label, n.source) not in seen:
            seen.add((n.label, n.source))
            out.append(n)
    return out


def _nix_way(host: Host) -> str:
    """How a Nix program finds the driver without a driver directory of its own."""
    if host.env_driver:
        return f"through LD_LIBRARY_PATH ({host.env_driver}, for this shell only)"
    return f"in {NIXOS_DRIVER_DIR} ({host.nix_driver})"


def _dir(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _more(items: list) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


def judge_doctor(host: Host, targets: list[TargetFacts], findings: Findings) -> list[Check]:
    """The host's lines once; the driver, the CUDA runtime and the GPU code
    for each group of targets (store paths, trees), each line named by its
    group when there are several."""
    judge = DoctorJudge(host, findings)
    judge.cuda = not targets or any(t.uses_cuda for t in targets)
    judge.host_kind()
    users = []
    for target in targets or [None]:
        judge.prefix = _label(target) if len(targets) > 1 else ""
        user = judge.driver_library(target)
        compat = target is not None and target.compat is not None
        if user is None and host.driver is not None and not compat:
            user = host.driver.version
        users.append((user, compat))
    judge.prefix = ""
    user, compat = next((u for u in users if u[1]), users[0])
    judge.kernel_module(user, compat=compat)
    for target, (user, _) in zip(targets, users):
        judge.prefix = _label(target) if len(targets) > 1 else ""
        judge.cuda_runtime(target, user)
    judge.prefix = ""
    devices = judge.gpus()
    for target in targets:
        judge.prefix = _label(target) if len(targets) > 1 else ""
        judge.gpu_code(target, devices)
    return judge.checks


def _label(target: TargetFacts) -> str:
    return f"{target.targets[0]}{_more(target.targets)}: "
