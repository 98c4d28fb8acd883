"""Closures as plain data for the report tests, and the page built from them
the way `closure-audit report` builds it (no Nix needed)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import synthetic  # noqa: E402
from closure_audit.closure.evidence import Scanner  # noqa: E402
from closure_audit.closure.graph import Closure, build_graph, parse_path_info  # noqa: E402
from closure_audit.closure.sizes import added_sizes, dominator_tree, roots_closure_size  # noqa: E402
from closure_audit.closure.why import forbidden_paths  # noqa: E402
from closure_audit.findings.collector import Findings  # noqa: E402
from closure_audit.findings.policy import load_policy  # noqa: E402
from closure_audit.output import html  # noqa: E402

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
    return f"{STORE}/{synthetic._hash(sorted(SHAPE).index(name), 7)}-{name}"


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
    forbidden_paths(closure, policy, findings, added=added, scanner=Scanner(closure.store_dir))
    return html.Picture(name, closure, roots_closure_size(closure), added, tree, findings.sorted() + list(extra),
                        verdict)


def shape_picture(**options) -> html.Picture:
    return picture(closure_of(SHAPE, ["app-1.0"]), **options)


def synthetic_closure(paths: int, seed: int = 0) -> Closure:
    data = synthetic.generate(paths, seed=seed)
    graph = build_graph(parse_path_info(data, STORE, "synthetic"))
    return Closure(graph, [next(iter(data))], "synthetic", STORE)
