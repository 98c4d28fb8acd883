"""Closures as plain data for the report tests, and the page built from them
the way `closure-audit report` builds it (no Nix needed)."""

from __future__ import annotations

import synthetic
from closure_audit.closure.evidence import Scanner
from closure_audit.closure.graph import Closure, build_graph, parse_path_info
from closure_audit.closure.sizes import added_sizes, dominator_tree, roots_closure_size
from closure_audit.closure.why import explain
from closure_audit.findings.forbidden import forbidden_findings, forbidden_matches
from closure_audit.findings.collector import Findings
from closure_audit.policy.load import load_policy
from closure_audit.output import html

STORE = "/nix/store"
MiB = 1 << 20

# name -> (NAR size, references). The dominator tree:
#   app-1.0 ─┬─ torch-2.9.0-lib ─┬─ cuda13.0-libcublas (torch and magma need it)
#            │                   ├─ cuda13.0-cuda_cudart
#            │                   └─ magma-2.7.2 ── libgfortran-13.2.0-lib
#            ├─ python3-3.12.10 ── openssl-3.4.1
#            ├─ glibc-2.40-66 (torch, python3 and openssl need it)
#            └─ zlib-1.3.1
SHAPE = {
    "app-1.0": (2 * MiB, ["torch-2.9.0-lib", "python3-3.12.10"]),
    "torch-2.9.0-lib": (300 * MiB, ["cuda13.0-libcublas-13.1.0.3-lib", "cuda13.0-cuda_cudart-13.0.96-lib",
                                    "magma-2.7.2", "glibc-2.40-66", "zlib-1.3.1"]),
    "python3-3.12.10": (40 * MiB, ["glibc-2.40-66", "openssl-3.4.1", "zlib-1.3.1"]),
    "cuda13.0-libcublas-13.1.0.3-lib": (400 * MiB, ["glibc-2.40-66"]),
    "cuda13.0-cuda_cudart-13.0.96-lib": (MiB, ["glibc-2.40-66"]),
    "magma-2.7.2": (150 * MiB, ["cuda13.0-libcublas-13.1.0.3-lib", "libgfortran-13.2.0-lib"]),
    "libgfortran-13.2.0-lib": (3 * MiB, ["glibc-2.40-66"]),
    "openssl-3.4.1": (6 * MiB, ["glibc-2.40-66"]),
    "glibc-2.40-66": (30 * MiB, []),
    "zlib-1.3.1": (100 * 1024, []),
}


def store_path(name: str) -> str:
    return f"{STORE}/{synthetic.fake_hash(name, 7)}-{name}"


def closure_of(entries: dict[str, tuple[int, list[str]]], roots: list[str]) -> Closure:
    data = {store_path(n): {"narSize": nar, "references": [store_path(r) for r in refs]}
            for n, (nar, refs) in entries.items()}
    graph = build_graph(parse_path_info(data, STORE, "test"))
    return Closure(graph, [store_path(r) for r in roots], "test", STORE)


def picture(closure: Closure, name: str = "app", verdict: bool | None = None, extra=()) -> html.Picture:
    """A picture as the report command makes it: sizes, the dominator tree,
    and the forbidden paths of the default policy with their chains."""
    tree = dominator_tree(closure)
    added = added_sizes(closure, tree)
    policy = load_policy(None)
    findings = Findings(policy, "nix-store")
    forbidden_findings(explain(closure, forbidden_matches(closure, policy), scanner=Scanner(closure.store_dir)), added,
                       findings)
    return html.Picture(name=name, closure=closure, closure_size=roots_closure_size(closure), added=added,
                        dominators=tree, findings=findings.sorted() + list(extra), verdict=verdict)


def shape_picture(**options) -> html.Picture:
    return picture(closure_of(SHAPE, ["app-1.0"]), **options)


def synthetic_closure(paths: int, seed: int = 0) -> Closure:
    data = synthetic.generate(paths, seed=seed)
    graph = build_graph(parse_path_info(data, STORE, "synthetic"))
    return Closure(graph, [next(iter(data))], "synthetic", STORE)


GiB, KiB = 1 << 30, 1 << 10
_C = "cuda13.0-"
# A PyTorch environment on CUDA 13 with magma's shared libraries in it: the
# picture in docs/commands/report.md.
TORCH_ENV = {
    "python3-3.12.10-env": (40 * KiB, ["python3.12-torch-2.9.0-lib", "python3.12-numpy-2.3.4", "python3-3.12.10"]),
    "python3.12-torch-2.9.0-lib": (
        int(1.4 * GiB), [_C + n for n in ("libcublas-13.1.0.3-lib", "cudnn-9.27.0.1-lib", "nccl-2.27.7-1",
                                          "libcusparse-12.6.2.49-lib", "libcufft-12.0.0.61-lib",
                                          "libcurand-10.4.0.35-lib", "libcusolver-12.0.4.66-lib",
                                          "cuda_cudart-13.0.96-lib", "cuda_cupti-13.0.85-lib",
                                          "cuda_nvrtc-13.0.88-lib")]
        + ["magma-2.9.0", "python3.12-triton-3.5.0", "python3.12-sympy-1.14.0", "python3.12-networkx-3.5",
           "python3.12-jinja2-3.1.6", "python3.12-filelock-3.18.0", "python3.12-fsspec-2025.7.0",
           "python3.12-typing-extensions-4.14.1", "python3.12-numpy-2.3.4", "gcc-14.2.1-lib", "glibc-2.40-66"]),
    _C + "libcublas-13.1.0.3-lib": (780 * MiB, ["glibc-2.40-66", "gcc-14.2.1-lib"]),
    _C + "cudnn-9.27.0.1-lib": (1100 * MiB, [_C + "libcublas-13.1.0.3-lib", _C + "cuda_nvrtc-13.0.88-lib",
                                              "glibc-2.40-66", "zlib-1.3.1"]),
    _C + "nccl-2.27.7-1": (290 * MiB, ["glibc-2.40-66"]),
    _C + "libcusparse-12.6.2.49-lib": (270 * MiB, [_C + "libnvjitlink-13.0.88-lib", "glibc-2.40-66"]),
    _C + "libcufft-12.0.0.61-lib": (280 * MiB, ["glibc-2.40-66"]),
    _C + "libcurand-10.4.0.35-lib": (120 * MiB, ["glibc-2.40-66"]),
    _C + "libcusolver-12.0.4.66-lib": (300 * MiB, [_C + "libcublas-13.1.0.3-lib", _C + "libcusparse-12.6.2.49-lib",
                                                    _C + "libnvjitlink-13.0.88-lib", "glibc-2.40-66"]),
    _C + "libnvjitlink-13.0.88-lib": (90 * MiB, ["glibc-2.40-66"]),
    _C + "cuda_cudart-13.0.96-lib": (MiB, ["glibc-2.40-66"]),
    _C + "cuda_cupti-13.0.85-lib": (25 * MiB, ["glibc-2.40-66"]),
    _C + "cuda_nvrtc-13.0.88-lib": (110 * MiB, ["glibc-2.40-66"]),
    "magma-2.9.0": (220 * MiB, [_C + "libcublas-13.1.0.3-lib", _C + "libcusparse-12.6.2.49-lib", "openblas-0.3.30",
                                "gfortran-14.2.1-lib", "glibc-2.40-66"]),
    "python3.12-triton-3.5.0": (500 * MiB, ["python3-3.12.10", "gcc-14.2.1-lib", "zlib-1.3.1"]),
    "python3.12-numpy-2.3.4": (40 * MiB, ["openblas-0.3.30", "python3-3.12.10"]),
    "openblas-0.3.30": (40 * MiB, ["gfortran-14.2.1-lib", "glibc-2.40-66"]),
    "gfortran-14.2.1-lib": (4 * MiB, ["gcc-14.2.1-lib"]),
    "python3.12-sympy-1.14.0": (70 * MiB, ["python3.12-mpmath-1.3.0", "python3-3.12.10"]),
    "python3.12-mpmath-1.3.0": (6 * MiB, ["python3-3.12.10"]),
    "python3.12-networkx-3.5": (18 * MiB, ["python3-3.12.10"]),
    "python3.12-jinja2-3.1.6": (3 * MiB, ["python3.12-markupsafe-3.0.2", "python3-3.12.10"]),
    "python3.12-markupsafe-3.0.2": (200 * KiB, ["python3-3.12.10"]),
    "python3.12-filelock-3.18.0": (100 * KiB, ["python3-3.12.10"]),
    "python3.12-fsspec-2025.7.0": (2500 * KiB, ["python3-3.12.10"]),
    "python3.12-typing-extensions-4.14.1": (300 * KiB, ["python3-3.12.10"]),
    "python3-3.12.10": (110 * MiB, ["glibc-2.40-66", "openssl-3.4.1", "libffi-3.4.6", "sqlite-3.48.0", "zlib-1.3.1",
                                    "bzip2-1.0.8", "xz-5.6.3", "expat-2.6.4", "mpdecimal-4.0.0", "ncurses-6.5",
                                    "readline-8.2p13"]),
    "glibc-2.40-66": (30 * MiB, []),
    "gcc-14.2.1-lib": (8 * MiB, ["glibc-2.40-66"]),
    "openssl-3.4.1": (6 * MiB, ["glibc-2.40-66"]),
    "sqlite-3.48.0": (2 * MiB, ["glibc-2.40-66", "zlib-1.3.1", "readline-8.2p13"]),
    "libffi-3.4.6": (200 * KiB, ["glibc-2.40-66"]),
    "zlib-1.3.1": (150 * KiB, ["glibc-2.40-66"]),
    "bzip2-1.0.8": (200 * KiB, ["glibc-2.40-66"]),
    "xz-5.6.3": (MiB, ["glibc-2.40-66"]),
    "expat-2.6.4": (400 * KiB, ["glibc-2.40-66"]),
    "mpdecimal-4.0.0": (400 * KiB, ["glibc-2.40-66"]),
    "ncurses-6.5": (3 * MiB, ["glibc-2.40-66"]),
    "readline-8.2p13": (MiB, ["ncurses-6.5", "glibc-2.40-66"]),
}
