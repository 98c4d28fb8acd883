"""What a host is and has, read under a root: its kind, where it keeps the
NVIDIA driver's libraries and which versions they are, the kernel module's
version, and its GPUs with their compute capabilities."""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import KW_ONLY, dataclass, field

from ..elf.reader import InvalidElf, parse_sections
from ..cuda.driver import kernel_module_version, library_version_from_name
from ..cuda.models import TEGRA, TEGRA_NAMES, capability_of
from .root import Root

NIXOS_DRIVER_DIR = "/run/opengl-driver/lib"
WSL_DRIVER_DIR = "/usr/lib/wsl/lib"
TEGRA_DIRS = ("/usr/lib/aarch64-linux-gnu/tegra", "/usr/lib/aarch64-linux-gnu/nvidia")
# Where distributions and container runtimes put the driver's libraries,
# after the directories /etc/ld.so.conf names.
SYSTEM_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64",
               "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/local/nvidia/lib64",
               "/usr/local/nvidia/lib", "/usr/lib", "/lib")
DRIVER_LIBRARY = "libcuda.so.1"
SMI_QUERY = ["--query-gpu=name,compute_cap,pci.bus_id", "--format=csv"]


@dataclass
class Gpu:
    name: str
    capability: str | None  # "8.6"; None when nothing tells it
    source: str  # nvidia-smi, /proc/driver/nvidia/gpus/..., the device tree
    _: KW_ONLY
    # The capability cuda/models.py's table gives for the GPU's model name, the
    # name, and where it was read (the kernel module's /proc file, else nvidia-smi).
    model_capability: str | None = None
    model_source: str | None = None
    model: str | None = None

    @property
    def device(self) -> tuple[int, int] | None:
        """The capability as (major, minor)."""
        return None if self.capability is None else tuple(int(x) for x in self.capability.split("."))


@dataclass
class DriverLibrary:
    path: str  # the host path it is found under: /usr/lib/x86_64-linux-gnu/libcuda.so.1
    real: str  # that path with its links resolved
    version: str | None
    version_source: str | None  # "file name", "version string", "nvidia-smi"


@dataclass
class Host:
    root: str
    kind: str  # nixos, wsl, jetson, container, distro
    description: str  # what a person reads: "NixOS 24.11", "Ubuntu 24.04 in a docker container"
    distribution: tuple[str, ...] = ()  # os-release's ID and ID_LIKE: ("ubuntu", "debian")
    container: str | None = None
    driver_dirs: list[str] = field(default_factory=list)  # the host's directories holding the driver
    driver: DriverLibrary | None = None
    # The driver as Nix programs find it besides a runpath: libcuda.so.1 in the
    # driver directory (/run/opengl-driver/lib), and in a directory of this
    # shell's LD_LIBRARY_PATH (host paths, under the root): their host paths.
    nix_driver: str | None = None
    env_driver: str | None = None
    kernel_module: str | None = None  # version, or None when not loaded (or none: WSL, old Jetson)
    kernel_module_text: str | None = None
    tegra_release: str | None = None  # "R36.3.0"
    gpus: list[Gpu] = field(default_factory=list)
    smi: str | None = None  # host path of nvidia-smi, when there is one
    smi_error: str | None = None


def _os_release(root: Root) -> dict[str, str]:
    text = root.read_text("/etc/os-release") or root.read_text("/usr/lib/os-release") or ""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


def _container(root: Root) -> str | None:
    if root.exists("/.dockerenv"):
        return "docker"
    if root.exists("/run/.containerenv"):
        return "podman"
    env = root.read_text("/proc/1/environ") or ""
    m = re.search(r"(?:^|\0)container=([^\0]+)", env)
    if m:
        return m[1]
    cgroup = root.read_text("/proc/1/cgroup") or ""
    for word in ("kubepods", "docker", "containerd", "lxc"):
        if word in cgroup:
            return "kubernetes" if word == "kubepods" else word
    return None


def _tegra_release(root: Root) -> str | None:
    text = root.read_text("/etc/nv_tegra_release")
    if text is None:
        return None
    m = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text)
    return f"R{m[1]}.{m[2]}" if m else "unknown release"


def host_library_dirs(root: Root, kind: str) -> list[str]:
    """Where this host's loader looks, the kind's own driver directory first."""
    first = {"nixos": [NIXOS_DRIVER_DIR], "wsl": [WSL_DRIVER_DIR], "jetson": list(TEGRA_DIRS)}.get(kind, [])
    out = []
    for d in first + root.ld_so_conf() + list(SYSTEM_DIRS):
        if d not in out:
            out.append(d)
    return out


_VERSION_STRING = re.compile(rb"(?:NVIDIA|CUDA)[^\0\n]{0,64}?\b(\d{3,}\.\d{1,3}(?:\.\d{1,3})?)(?![\d.])")


def version_string(path: str) -> str | None:
    """A driver version written in a library's read-only data (a string that
    names NVIDIA or CUDA, then the version), for libraries whose file name
    carries none."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                spans = [(s.offset, s.offset + s.size) for s in parse_sections(data, len(data))
                         if s.name.startswith((".rodata", ".lrodata")) and s.size]
            except InvalidElf:
                spans = []
            for start, end in spans or [(0, len(data))]:
                m = _VERSION_STRING.search(data, start, end)
                if m:
                    return m[1].decode()
    except (OSError, ValueError):
        return None
    return None


def find_library(root: Root, dirs: list[str], name: str) -> str | None:
    """The host path of the first `name` in `dirs`, as the host's loader would find it."""
    return next((p for d in dirs if root.isfile(p := f"{d.rstrip('/')}/{name}")), None)


def find_driver(root: Root, dirs: list[str]) -> DriverLibrary | None:
    host_path = find_library(root, dirs, DRIVER_LIBRARY)
    if host_path is not None:
        real = root.resolve(host_path)
        version = library_version_from_name(os.path.basename(real))
        source = "file name" if version else None
        if version is None:
            version = version_string(root.local(real))
            source = "version string" if version else None
        return DriverLibrary(host_path, real, version, source)
    return None


def _gpus_from_smi(root: Root, host: Host) -> None:
    host.smi = root.which("nvidia-smi") or next(
        (p for p in (f"{WSL_DRIVER_DIR}/nvidia-smi", "/run/current-system/sw/bin/nvidia-smi")
         if root.isfile(p)), None)
    if host.smi is None:
        return
    got = root.run(host.smi, SMI_QUERY)
    if got is None or got[0] != 0:
        host.smi_error = (got[2].strip().splitlines() or ["failed"])[-1] if got else "could not run"
        return
    lines = [line for line in got[1].splitlines() if line.strip()]
    models = _proc_models(root)
    for i, line in enumerate(lines[1:]):  # the first is the header
        name, cap, bus = (x.strip() for x in line.rsplit(",", 2)) if line.count(",") >= 2 else (line, "", "")
        # The kernel module's model of the same GPU: by PCI address, else by order.
        model, where = models.get(_bus_key(bus)) or (list(models.values())[i] if len(models) > i else (name, None))
        known = capability_of(model)
        if re.fullmatch(r"\d+\.\d+", cap):  # the driver's own answer (drivers since 510)
            host.gpus.append(Gpu(name, cap, "nvidia-smi", model_capability=known, model_source=where or "nvidia-smi",
                                 model=model))
        else:
            host.gpus.append(Gpu(name, known, f"nvidia-smi name {name!r} in the model table"))
    if host.driver is not None and host.driver.version is None:
        got = root.run(host.smi, ["--query-gpu=driver_version", "--format=csv,noheader"])
        if got is not None and got[0] == 0 and got[1].strip():
            host.driver.version = got[1].splitlines()[0].strip()
            host.driver.version_source = "nvidia-smi"


def _bus_key(bus: str) -> tuple[int, str] | None:
    """A PCI address comparable across nvidia-smi (00000000:01:00.0) and
    /proc (0000:01:00.0): the domain as a number, the rest as written."""
    domain, sep, rest = bus.partition(":")
    try:
        return (int(domain, 16), rest.lower()) if sep else None
    except ValueError:
        return None


def _proc_models(root: Root) -> dict:
    """The kernel module's GPUs: PCI address -> (model name, the file that says so)."""
    base = "/proc/driver/nvidia/gpus"
    out = {}
    for bus in root.listdir(base):
        where = f"{base}/{bus}/information"
        m = re.search(r"^Model:\s*(.+)$", root.read_text(where) or "", re.M)
        if m:
            out[_bus_key(bus) or bus] = (m[1].strip(), where)
    return out


def _gpus_from_proc(root: Root, host: Host) -> None:
    for name, where in _proc_models(root).values():
        host.gpus.append(Gpu(name, capability_of(name), where))


def _gpus_from_tegra(root: Root, host: Host) -> None:
    compatible = (root.read_text("/proc/device-tree/compatible") or "").split("\0")
    for soc, cap in TEGRA.items():
        if any(c.endswith(soc) for c in compatible):
            host.gpus.append(Gpu(TEGRA_NAMES[soc], cap, "/proc/device-tree/compatible"))
            return


def probe(root_dir: str = "/") -> Host:
    root = Root(root_dir)
    release = _os_release(root)
    name = release.get("PRETTY_NAME") or release.get("NAME") or "an unknown distribution"
    container = _container(root)
    tegra = _tegra_release(root)
    if root.exists("/etc/NIXOS") or release.get("ID") == "nixos":
        kind, description = "nixos", name
    elif root.isdir(WSL_DRIVER_DIR) or "microsoft" in (root.read_text("/proc/version") or "").lower():
        kind, description = "wsl", f"WSL ({name})"
    elif tegra is not None:
        kind, description = "jetson", f"Jetson, L4T {tegra} ({name})"
    elif container is not None:
        kind, description = "container", f"{name} in a {container} container"
    else:
        kind, description = "distro", name
    distribution = tuple(f"{release.get('ID', '')} {release.get('ID_LIKE', '')}".split())
    host = Host(root.path, kind, description, distribution, container=container, tegra_release=tegra)
    host.driver_dirs = host_library_dirs(root, kind)
    host.driver = find_driver(root, host.driver_dirs)
    host.nix_driver = find_library(root, [NIXOS_DRIVER_DIR], DRIVER_LIBRARY)
    env_dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/")]
    host.env_driver = find_library(root, env_dirs, DRIVER_LIBRARY)
    host.kernel_module_text = root.read_text("/proc/driver/nvidia/version")
    host.kernel_module = kernel_module_version(host.kernel_module_text)
    _gpus_from_smi(root, host)
    if not host.gpus:
        _gpus_from_proc(root, host)
    if not host.gpus and kind == "jetson":
        _gpus_from_tegra(root, host)
    return host
