"""closure/diff.py on closures given as data: packages matched across
CUDA and Python release prefixes."""

from __future__ import annotations

from closure_audit.closure.diff import diff, split_release
from closure_audit.closure.graph import Closure, build_graph

STORE = "/nix/store"


def closure(*names: str, sizes: dict[str, int] | None = None) -> Closure:
    paths = [f"{STORE}/{chr(97 + i) * 32}-{n}" for i, n in enumerate(names)]
    root = f"{STORE}/{'z' * 32}-root"
    entries = {p: {"nar_size": (sizes or {}).get(n, 100), "references": []} for p, n in zip(paths, names)}
    entries[root] = {"nar_size": 1, "references": paths}
    return Closure(build_graph(entries), [root], "test", STORE)


def by_name(packages):
    return {(p.name, p.output): p for p in packages}


def test_cuda_release_prefix_is_a_change_not_an_add_and_a_remove():
    old = closure("cuda12.9-cuda_cudart-12.9.79-lib", "python3.12-numpy-2.1.0")
    new = closure("cuda13.0-cuda_cudart-13.0.96-lib", "python3.13-numpy-2.1.0")
    packages = diff(old, new)
    assert [p.status for p in packages] == ["changed", "changed"]
    got = by_name(packages)
    cudart = got[("cuda13.0-cuda_cudart", "lib")]
    assert cudart.old_versions == ["12.9.79 (cuda12.9)"] and cudart.new_versions == ["13.0.96 (cuda13.0)"]
    numpy = got[("python3.13-numpy", "out")]
    assert numpy.old_versions == ["2.1.0 (python3.12)"] and numpy.new_versions == ["2.1.0 (python3.13)"]
    assert len(numpy.old_paths) == len(numpy.new_paths) == 1


def test_same_release_versions_read_as_before():
    packages = diff(closure("python3.12-numpy-2.1.0"), closure("python3.12-numpy-2.2.0"))
    (p,) = packages
    assert (p.name, p.status, p.old_versions, p.new_versions) == ("python3.12-numpy", "changed", ["2.1.0"], ["2.2.0"])


def test_unrelated_packages_stay_apart():
    packages = by_name(diff(closure("python3.12-numpy-2.1.0"), closure("python3.12-scipy-1.14.0")))
    assert packages[("python3.12-numpy", "out")].status == "removed"
    assert packages[("python3.12-scipy", "out")].status == "added"


def test_split_release():
    assert split_release("cuda12.9-cuda_cudart") == ("cuda12.9", "cuda_cudart")
    assert split_release("python3.13-numpy") == ("python3.13", "numpy")
    assert split_release("python3-numpy") == ("python3", "numpy")
    assert split_release("cudatoolkit") == ("", "cudatoolkit")
    assert split_release("python3.12") == ("", "python3.12")
