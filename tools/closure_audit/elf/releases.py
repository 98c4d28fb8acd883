"""Which release a library file is, and what a framework records about the
CUDA, cuDNN and NCCL it was built against: read from files, nothing run.

A library's release, first source that answers:
- its file name, where it carries the full release (a Nix store path's
  lib/libcublas.so.12.8.4.1, the file its SONAME link points to);
- else the installed distribution whose RECORD claims the file with these
  bytes (nvidia-cublas 13.1.0.3 installs nvidia/cu13/lib/libcublas.so.13):
  the only claimant when the size agrees with its RECORD, else the one whose
  SHA-256 matches (nvidia-cudnn-cu12 and -cu13 claim the same paths).
NVIDIA's wheels name their files by SONAME only (libcudnn.so.9, libnccl.so.2)
and their version strings in read-only data are format strings filled at
run time, so a wheel's file without a RECORD has no release here.

A framework's build (Build): PyTorch's torch/version.py (`cuda = "13.0"`),
TensorFlow's tensorflow/python/platform/build_info.py (`build_info`'s
`cuda_version`, `cudnn_version`), and the lowest version of each NVIDIA
distribution its METADATA requires (torch pins the cuDNN and NCCL it was
built with: nvidia-cudnn-cu13==9.24.0.x).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

from .dists import Distribution, cuda_major
from .ondisk import matching_claims

_FULL = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")


@dataclass(frozen=True)
class Release:
    version: str
    source: str  # in words: "its file name", "nvidia-cublas-cu12 12.8.4.1's RECORD"
    cuda_major: str | None  # the CUDA major it was built for, where told


class Releases:
    """Release of each real path, read once (a hash only where two RECORDs
    claim the path and sizes leave the question open)."""

    def __init__(self, dists_by_site: list[tuple[str, list[Distribution]]]):
        # A file's claims are looked up under each site it lies in, by its path
        # there (RECORD's paths are normalized as read, elf/dists.py), rather
        # than every RECORD row indexed by its absolute path first: tens of
        # thousands of rows, a few hundred files asked about. Only a path
        # reaching outside its site (../../bin) or absolute is indexed.
        self._sites: list[tuple[str, list[Distribution]]] = []
        self._outside: dict[str, list[tuple[Distribution, str]]] = {}
        for site, dists in dists_by_site:
            top = os.path.normpath(site)
            self._sites.append((top.rstrip("/") + "/", dists))
            for d in dists:
                for rel in d.outside:
                    self._outside.setdefault(os.path.normpath(os.path.join(top, rel)), []).append((d, rel))
        self._seen: dict[str, Release | None] = {}

    def _claims(self, real: str) -> list[tuple[Distribution, str]]:
        """Every (distribution, RECORD path) claiming the file at `real`."""
        out = []
        for top, dists in self._sites:
            if real.startswith(top):
                rel = real[len(top):]
                out += [(d, rel) for d in dists if rel in d.files]
        return out + self._outside.get(real, [])

    def of(self, real: str) -> Release | None:
        if real not in self._seen:
            self._seen[real] = self._read(real)
        return self._seen[real]

    def _read(self, real: str) -> Release | None:
        m = _FULL.search(os.path.basename(real))
        if m:
            return Release(m[1], "its file name", m[1].split(".")[0] if _numbered_with_cuda(real) else None)
        sized = matching_claims(real, self._claims(real))
        if sized is None or len(sized) != 1:
            return None
        d = sized[0][0]
        return Release(d.version, f"{d.name} {d.version}'s RECORD", cuda_major(d))


def _numbered_with_cuda(real: str) -> bool:
    """A library numbered with the CUDA release (cuBLAS 12.8.4.1 is CUDA 12),
    unlike cuDNN, NCCL, cuTENSOR, NVSHMEM (their own numbers)."""
    base = os.path.basename(real)
    return not base.startswith(("libcudnn", "libnccl", "libcutensor", "libnvshmem", "libcusparseLt", "libcudss"))


@dataclass
class Build:
    """What a framework records about its build."""

    framework: str
    cuda: str | None = None  # "13.0"
    cuda_source: str | None = None
    minimums: dict[str, tuple[str, str]] = field(default_factory=dict)  # library stem -> (version, where)


# The NVIDIA distributions whose version a framework's pin gives, by the library they install.
PINNED = {"libcudnn": "nvidia-cudnn", "libnccl": "nvidia-nccl"}


def read_builds(sites: list[str], dists: list[Distribution]) -> dict[str, Build]:
    """Build of each framework the sites record one for: torch, tensorflow."""
    out: dict[str, Build] = {}
    for site in sites:
        torch = _assignments(os.path.join(site, "torch", "version.py"))
        if isinstance(torch.get("cuda"), str):
            out["torch"] = Build("torch", torch["cuda"], "torch/version.py")
        info = _assignments(os.path.join(site, "tensorflow", "python", "platform", "build_info.py")).get("build_info")
        if isinstance(info, dict) and isinstance(info.get("cuda_version"), str):
            b = out["tensorflow"] = Build("tensorflow", info["cuda_version"], "tensorflow build_info")
            if isinstance(info.get("cudnn_version"), str):
                b.minimums["libcudnn"] = (info["cudnn_version"], "tensorflow build_info")
    for d in dists:
        b = out.get(d.key)
        if b is None:
            continue
        for stem, prefix in PINNED.items():
            for name, low in sorted(d.minimums.items()):
                if name.startswith(prefix) and (b.cuda is None or name.endswith(f"-cu{b.cuda.split('.')[0]}")
                                                or not re.search(r"-cu\d+$", name)):
                    b.minimums[stem] = (low, f"{d.name} {d.version}'s Requires-Dist {name}")
    return out


def _assignments(path: str) -> dict:
    """Module-level NAME = literal of a Python file; {} when unreadable.
    TensorFlow writes `build_info = collections.OrderedDict([(key, value), ...])`:
    a dict built from a literal list of pairs counts as that dict."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read(1 << 20))
    except (OSError, SyntaxError, ValueError):
        return {}
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        try:
            out[target.id] = _literal(value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
    return out


def _literal(node: ast.expr):
    """A literal, or dict/OrderedDict of one literal sequence of pairs."""
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if fn in ("OrderedDict", "dict"):
            pairs = ast.literal_eval(node.args[0])
            if isinstance(pairs, (list, tuple)) and all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
                return dict(pairs)
            raise ValueError("not a sequence of pairs")
    return ast.literal_eval(node)
