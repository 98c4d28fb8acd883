"""Shared pieces of the benchmarks: the real-wheel tree and process timing.

Every benchmark times whole processes (start-up included), closure-audit as
users run it (installed from the checkout, `--json`), against anchor tools on
the same data in the same run, after a warm-up run of each, and reports the
fastest and the median wall time of several runs, the CPU time and the peak
resident memory of each command, with the load average while it ran: the
machine may be shared, and wall times follow its load (CPU times and memory
much less so).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("NIXCUDA_BENCH_CACHE", Path.home() / ".cache" / "nixcuda-bench"))
TORCH = "torch==2.14.1"


def closure_audit_command() -> list[str]:
    """closure-audit as users run it: this checkout installed, with its
    dependencies, into a virtual environment in the cache. Not an editable
    install: its import hook costs every start-up milliseconds no user pays."""
    root = Path(__file__).resolve().parent.parent
    venv = CACHE / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"installing closure-audit from {root} into {venv} ...", file=sys.stderr)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(pip + [str(root)], check=True)
    subprocess.run(pip + ["--no-deps", "--force-reinstall", str(root)], check=True)
    return [str(venv / "bin" / "closure-audit")]


def wheel_dir(wheels: str | None) -> Path:
    """A directory holding the torch wheel and NVIDIA's CUDA 13 wheels; pip
    fills it on first use."""
    d = Path(wheels) if wheels else CACHE / "wheels"
    if not glob.glob(str(d / "torch-2.14.1-*.whl")):
        d.mkdir(parents=True, exist_ok=True)
        print(f"downloading {TORCH} and its CUDA wheels into {d} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", TORCH, "-d", str(d)], check=True)
    return d


def torch_tree(wheels: str | None, tree: str | None) -> Path:
    """PyTorch and NVIDIA's CUDA 13 wheels laid out as pip lays them out, with
    PyTorch's pure-Python requirements (filelock, sympy, ...) so `import
    torch` works; those hold no ELF file, so the tree's ELF files are the
    CUDA build's alone."""
    t = Path(tree) if tree else CACHE / "torch-cu13-tree"
    site = t / "site-packages"
    steps = [("torch", ["torch-2.14.1-*.whl", "nvidia_*.whl"]), ("filelock", ["*-none-any.whl"])]
    for marker, patterns in steps:
        if (site / marker).is_dir():
            continue
        d = wheel_dir(wheels)
        files = sorted(f for p in patterns for f in glob.glob(str(d / p)))
        print(f"installing {len(files)} wheels into {site} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                        "--target", str(site), *files], check=True)
    return t


@dataclass
class Timing:
    label: str
    seconds: float  # median wall time
    peak_mb: float  # largest peak RSS over the runs
    returncode: int
    cpu: float = 0.0  # median user + system time: what a busy machine's other work does not add to
    best: float | None = None  # fastest wall time (the median's where one run)
    runs: int = 1
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after the runs

    def __post_init__(self):
        if self.best is None:
            self.best = self.seconds

    def line(self) -> str:
        """min and median wall time, CPU, peak memory and load, as every benchmark prints them."""
        return (f"{self.label}: min {self.best:.3f} s, median {self.seconds:.3f} s of {self.runs} run"
                f"{'s' * (self.runs != 1)}, CPU {self.cpu:.3f} s, peak {self.peak_mb:.0f} MB, exit "
                f"{self.returncode}, load average {self.load[0]:.2f}-{self.load[1]:.2f}")


GNU_TIME = "/usr/bin/time"


def run_once(cmd: list[str]) -> tuple[float, float, int, float]:
    """Wall time, peak RSS in MB, exit status and CPU time of one run. The
    peak comes from GNU time: a child forked from this interpreter would
    count the interpreter's own pages in its peak."""
    fd, report = tempfile.mkstemp(prefix="bench-rss-")
    os.close(fd)
    try:
        start = time.perf_counter()
        proc = subprocess.run([GNU_TIME, "-q", "-f", "%M %U %S", "-o", report, *cmd],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        peak_kb, user, system = Path(report).read_text().split()[-3:]
    finally:
        os.unlink(report)
    return elapsed, int(peak_kb) / 1024, proc.returncode, float(user) + float(system)


def measure(label: str, cmd: list[str], runs: int, ok: tuple[int, ...] = (0, 1), warm_up: bool = True) -> Timing:
    """The median and the fastest of `runs` runs, each a fresh process, after
    a warm-up (unless `warm_up` is false: the caller warmed the page cache);
    printed as a line (Timing.line) as soon as measured. A run whose exit
    status is not in `ok` ends the benchmark: a tool that failed at once would
    look fast, and a ratio taken against it would pass."""
    load = os.getloadavg()[0]
    if warm_up:
        run_once(cmd)  # warm the page cache and any lazy state
    samples = [run_once(cmd) for _ in range(runs)]
    failed = [s[2] for s in samples if s[2] not in ok]
    if failed:
        sys.exit(f"benchmark: {label} failed with exit status {failed[0]}: {' '.join(cmd[:3])} ...")
    return summary(label, samples, load)


def summary(label: str, samples: list[tuple[float, float, int, float]], load: float) -> Timing:
    """The Timing of run_once()'s samples (`load`: the load average before
    them), printed as a line as soon as made."""
    t = Timing(label, statistics.median(s[0] for s in samples), max(s[1] for s in samples), samples[-1][2],
               statistics.median(s[3] for s in samples), min(s[0] for s in samples), len(samples),
               (load, os.getloadavg()[0]))
    print(f"  {t.line()}", flush=True)
    return t


def require(tool: str, package: str) -> str:
    """The path of a tool the benchmark needs, or exit naming its package."""
    path = shutil.which(tool)
    if path is None:
        sys.exit(f"benchmark: {tool} not found (Debian package {package})")
    return path


def debian_script(tool: str, package: str) -> list[str]:
    """A Debian tool written in Python (lddtree), run by Debian's interpreter:
    its shebang finds whichever python3 comes first on PATH, which may lack
    the Debian modules it imports (pyelftools)."""
    path = require(tool, package)
    with open(path, "rb") as f:
        shebang = f.readline()
    return ["/usr/bin/python3", path] if shebang.startswith(b"#!") and b"python" in shebang else [path]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# -- cuobjdump, the anchor for `archs` -------------------------------------------

CUOBJDUMP_WHEEL = "nvidia-cuda-cuobjdump"
_CUOBJDUMP_LINE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[a-z]?)\.(?:cubin|ptx)$")


def cuobjdump(path: str | None) -> str:
    """NVIDIA's cuobjdump: the one given, the one on PATH, or the one in
    NVIDIA's wheel, which pip fetches into the cache on first use."""
    if path:
        return path
    found = shutil.which("cuobjdump")
    if found:
        return found
    target = CACHE / "cuobjdump"
    hits = glob.glob(str(target / "nvidia" / "*" / "bin" / "cuobjdump"))
    if not hits:
        print(f"installing {CUOBJDUMP_WHEEL} into {target} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                        CUOBJDUMP_WHEEL], check=True)
        hits = glob.glob(str(target / "nvidia" / "*" / "bin" / "cuobjdump"))
    return hits[0]


def cuobjdump_listing(tool: str, path: str) -> Counter:
    """(kind, arch) -> entries, as `cuobjdump --list-elf --list-ptx -all` lists them."""
    p = subprocess.run([tool, "--list-elf", "--list-ptx", "-all", path], capture_output=True, text=True)
    out: Counter = Counter()
    for line in p.stdout.splitlines():
        m = _CUOBJDUMP_LINE.match(line.strip())
        if m:
            out["cubin" if m[1] == "ELF" else "ptx", m[2]] += 1
    return out


def archs_listing(report: dict) -> Counter:
    """The same from a `closure-audit archs --json` report, in cuobjdump's
    terms: fatbin sections only, no LTO IR (cuobjdump cannot list it), and
    family code under its plain name (cuobjdump prints sm_100f as sm_100)."""
    out: Counter = Counter()
    for f in report["files"]:
        for c in f["codes"]:
            if c["kind"] == "lto" or c["section"] not in (".nv_fatbin", "__nv_relfatbin"):
                continue
            arch = "sm_" + c["code"].split("_")[1].removesuffix("f")
            out[c["kind"], arch] += c["entries"]
    return out


def tree_arguments(doc: str, runs: int):
    """The arguments every benchmark on the real-wheel tree takes."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--wheels", help="directory with the torch and nvidia wheels (default: pip downloads)")
    ap.add_argument("--tree", help="where to lay them out (default: a cache directory)")
    ap.add_argument("--runs", type=int, default=runs)
    return ap.parse_args()


def elf_files(scanelf: str, tree: Path) -> list[str]:
    """Every ELF file of the tree, as scanelf lists them."""
    listing = subprocess.run([scanelf, "-R", "-B", "-F", "%F", str(tree)], capture_output=True, text=True)
    return [line for line in listing.stdout.splitlines() if line]


def report(timings: list[Timing], checks: list[tuple[str, bool]], width: int = 30) -> int:
    """Print the timings and each target's verdict; the exit status: 1 when a target is missed."""
    print()
    print(f"{'command':{width}} {'min s':>8} {'median s':>9} {'CPU s':>7} {'peak MB':>8} {'load':>9}")
    for t in timings:
        print(f"{t.label:{width}} {t.best:8.3f} {t.seconds:9.3f} {t.cpu:7.3f} {t.peak_mb:8.1f} "
              f"{t.load[0]:4.1f}-{t.load[1]:<4.1f}")
    return checked(checks)


def checked(checks: list[tuple[str, bool]]) -> int:
    """Print each target's verdict; the exit status: 1 when a target is missed."""
    print()
    for text, ok in checks:
        print(f"{verdict(ok)}  {text}")
    return 0 if all(ok for _, ok in checks) else 1
