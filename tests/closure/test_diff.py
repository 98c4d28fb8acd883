"""closure/diff.py on closures given as data: packages matched across
CUDA and Python release prefixes."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from closure_audit.closure.diff import diff
from closure_audit.closure.graph import Closure, build_graph, load_dump
from closure_audit.nix.storepath import name_part, package_key, parse_name, split_release

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


def test_prefixed_and_unprefixed_names_are_two_packages():
    # The Python binding and the C++ library: nvd and `nix store diff-closures` keep them apart.
    old = closure("python3.12-protobuf-5.28.3", "protobuf-28.3")
    new = closure("python3.12-protobuf-5.29.0", "protobuf-29.0")
    got = by_name(diff(old, new))
    assert set(got) == {("python3.12-protobuf", "out"), ("protobuf", "out")}
    assert got[("python3.12-protobuf", "out")].old_versions == ["5.28.3"]
    assert got[("protobuf", "out")].new_versions == ["29.0"]
    # An added prefixed package does not swallow a removed unprefixed one.
    got = by_name(diff(closure("protobuf-28.3"), closure("python3.12-protobuf-5.28.3")))
    assert got[("protobuf", "out")].status == "removed"
    assert got[("python3.12-protobuf", "out")].status == "added"


def test_split_release_families():
    assert package_key("python3.12-numpy") == package_key("python3.13-numpy") == ("python", "numpy")
    assert package_key("cuda12.9-cuda_cudart") == package_key("cuda13.0-cuda_cudart") == ("cuda", "cuda_cudart")
    assert package_key("protobuf") == ("", "protobuf") != package_key("python3.12-protobuf")


def test_no_record_mixes_prefixed_and_unprefixed_names_at_scale(tmp_path):
    """The scale benchmark's 100,000-path closures (prefixed and unprefixed
    names drawn from the same stems), before and after a change: every record
    holds names with one prefix family only."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gen_dumps

    files = []
    for variant in ("old", "new"):
        files.append(tmp_path / f"{variant}.json")
        files[-1].write_bytes(gen_dumps.dump(100_000, variant=variant))
    packages = diff(load_dump(str(files[0]), []), load_dump(str(files[1]), []))
    assert len(packages) > 1000
    family = re.compile(r"^(cuda|python|pypy)\d+(\.\d+)?-(?=\D)")
    mixed = []
    for p in packages:
        names = {parse_name(name_part(path))[0] for path in p.old_paths + p.new_paths}
        kinds = {(m.group(1) if (m := family.match(n)) else "", family.sub("", n)) for n in names}
        if len(kinds) > 1:
            mixed.append((p.name, sorted(names)))
    assert mixed == []


def test_terminal_diff_labels_roots_versionless_names_and_growth(tmp_path):
    from conftest import run_cli

    def dump(file, names, sizes, hashes):
        paths = [f"{STORE}/{h * 32}-{n}" for h, n in zip(hashes, names)]
        data = {p: {"narSize": s, "references": paths[1:] if i == 0 else []}
                for i, (p, s) in enumerate(zip(paths, sizes))}
        file.write_text(json.dumps(data))
        return paths[0]

    # The unversioned hook has a new hash: it was rebuilt.
    old_root = dump(tmp_path / "old.json", ["env-1", "setup-hook", "zlib-1.3"], [1000, 1000, 2000], "abc")
    new_root = dump(tmp_path / "new.json", ["env-2", "setup-hook", "zlib-1.3.1"], [1000, 1000, 3000], "dfg")
    p = run_cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(line.startswith("old") and old_root in line and "3.9 KiB" in line for line in lines), p.stdout
    assert any(line.startswith("new") and new_root in line and "4.9 KiB" in line for line in lines), p.stdout
    assert "+1000 B (+25.0%)" in p.stdout
    hook = next(line for line in lines if line.startswith("setup-hook"))
    assert "rebuilt" in hook and "(no version)" in hook and "∅" not in hook
    # The Markdown says the same.
    md = run_cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--markdown", "-").stdout
    assert f"old: {name_part(old_root)}, 3.9 KiB" in md and f"new: {name_part(new_root)}, 4.9 KiB, +1000 B (+25.0%)" in md
    assert "| `setup-hook` | rebuilt | (no version) |" in md
