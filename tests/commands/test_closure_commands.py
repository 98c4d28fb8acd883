"""why, size, diff and gate on real store closures built by Nix: the fixture
closure of support/closures.py, where every edge is a real reference Nix
registered."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from closures import FIXTURE, NEWER
from conftest import cli_json, run_cli
from nixstore import needs_nix, nix_build, path_info

pytestmark = needs_nix

@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("closure")
    body = FIXTURE.rstrip().rstrip("}") + NEWER + "}"
    names = ["torch", "torch2", "cudatoolkit", "magma", "blas.lib", "blas.dev", "blas.out", "a", "b", "c", "d",
             "nccl"]
    paths = {}
    for name in names:
        (paths[name],) = nix_build(tmp, body, attr=name)
    return paths


def offset_in(path: str, needle: str) -> int:
    """Where `needle` first occurs in a file, found independently of the tool."""
    data = open(path, "rb").read()
    return data.index(needle.encode())


def runpath_offset(path: str, entry_index: int) -> int:
    """File offset of a DT_RUNPATH entry, by pyelftools."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynstr = elf.get_section_by_name(".dynstr")
        tag = next(t for t in elf.get_section_by_name(".dynamic").iter_tags() if t.entry.d_tag == "DT_RUNPATH")
        value = tag.runpath.split(":")
        return dynstr["sh_offset"] + tag.entry.d_val + sum(len(v) + 1 for v in value[:entry_index])


def hash_of(path: str) -> str:
    return os.path.basename(path)[:32]


def test_forbidden_paths_with_chains_and_evidence(store):
    p, report = cli_json("why", store["torch"])
    assert p.returncode == 1
    assert report["command"] == "why" and report["target"] == [store["torch"]]
    found = {f["file"]: f for f in report["findings"]}
    assert set(found) == {store["cudatoolkit"], store["magma"]}
    cuda = found[store["cudatoolkit"]]
    assert cuda["rule"] == "forbidden-path" and cuda["severity"] == "error" and cuda["pattern"] == "cudatoolkit-*"
    assert cuda["chain"] == [store["torch"], store["cudatoolkit"]]
    (hop,) = cuda["hops"]
    libcuda = os.path.join(store["torch"], "lib/libtorch_cuda.so")
    libdeps = os.path.join(store["torch"], "lib/libtorch_global_deps.so")
    h = hash_of(store["cudatoolkit"])
    prefix = len(os.path.dirname(store["cudatoolkit"])) + 1  # the hash follows '/nix/store/'
    expected = [
        {"file": "lib/libtorch_cuda.so", "offset": runpath_offset(libcuda, 0) + prefix, "kind": "runpath-used",
         "entry": f"{store['cudatoolkit']}/lib"},
        {"file": "lib/libtorch_cuda.so", "offset": runpath_offset(libcuda, 1) + prefix, "kind": "runpath-unused",
         "entry": f"{store['cudatoolkit']}/lib64"},
        {"file": "lib/libtorch_global_deps.so", "offset": runpath_offset(libdeps, 0) + prefix,
         "kind": "runpath-unused", "entry": f"{store['cudatoolkit']}/lib64"},
    ]
    got = [{k: e[k] for k in ("file", "offset", "kind", "entry")} for e in hop["evidence"]]
    assert got == expected
    assert hop["evidence_total"] == 3 and all(h in e["context"] for e in hop["evidence"])

    magma = found[store["magma"]]
    (hop,) = magma["hops"]
    cmake = os.path.join(store["torch"], "share/cmake/TorchConfig.cmake")
    assert [(e["file"], e["offset"], e["kind"]) for e in hop["evidence"]] == [
        ("share/cmake/TorchConfig.cmake", len('set(MAGMA_ROOT "') + prefix, "text")]
    assert offset_in(cmake, hash_of(store["magma"])) == hop["evidence"][0]["offset"]


def test_reference_without_store_prefix(store):
    _, report = cli_json("why", store["torch"], "fixture-blas")
    (e,) = report["explanations"]
    assert e["path"] == store["blas.lib"] and e["chain"] == [store["torch"], store["blas.lib"]]
    (hit,) = e["hops"][0]["evidence"]
    assert (hit["file"], hit["offset"], hit["kind"]) == ("share/doc/build-info.txt", len("built against: "), "text")
    assert "/nix/store" not in hit["context"]


def test_elf_string_and_symlink_and_a_store_path_that_is_a_file(store):
    _, report = cli_json("why", store["torch"], "fixture-d", "--all-chains")
    (e,) = report["explanations"]
    assert e["path"] == store["d"] and len(e["chain"]) == 4
    assert e["chain"] in ([store[k] for k in ("torch", "a", "c", "d")], [store[k] for k in ("torch", "b", "c", "d")])
    kinds = [(h["from"], h["evidence"][0]["kind"], h["evidence"][0]["file"]) for h in e["hops"]]
    first = {store["a"]: ("elf-string", "lib/libtorch_python.so"), store["b"]: ("symlink", "share/b-link")}
    assert kinds[0] == (store["torch"], *first[e["chain"][1]])
    assert kinds[2] == (store["c"], "text", "share/ref.txt")
    assert [r["from"] for r in e["referrers"]] == [store["c"]]
    python = os.path.join(store["torch"], "lib/libtorch_python.so")
    _, report = cli_json("why", store["torch"], "fixture-a")
    (hit,) = report["explanations"][0]["hops"][0]["evidence"]
    assert hit["offset"] == offset_in(python, hash_of(store["a"]))
    _, report = cli_json("why", store["torch"], "fixture-c", "--all-chains")
    refs = {r["from"]: r["evidence"][0] for r in report["explanations"][0]["referrers"]}
    assert (refs[store["a"]]["file"], refs[store["a"]]["offset"], refs[store["a"]]["kind"]) == (
        "", len(os.path.dirname(store["c"])) + 1, "text")  # fixture-a is a file, not a directory
    assert (refs[store["b"]]["file"], refs[store["b"]]["kind"]) == ("c-link", "symlink")


def test_query_exit_status(store):
    assert run_cli("why", store["torch"], "no-such-package").returncode == 1
    assert run_cli("why", store["d"]).returncode == 0  # nothing forbidden


def test_sizes_and_the_diamond(store):
    info = path_info(store["torch"])
    nar = {p: e["narSize"] for p, e in info.items()}
    _, report = cli_json("size", store["torch"], "--all")
    rows = {r["path"]: r for r in report["paths"]}
    assert set(rows) == set(nar) and report["summary"]["closure_size"] == sum(nar.values())
    # c and d are reached through a and through b: neither a nor b dominates them.
    assert rows[store["c"]]["added_size"] == nar[store["c"]] + nar[store["d"]]
    assert rows[store["a"]]["added_size"] == nar[store["a"]]
    assert rows[store["b"]]["added_size"] == nar[store["b"]]
    assert rows[store["d"]]["added_size"] == nar[store["d"]]
    assert rows[store["torch"]]["added_size"] == sum(nar.values())
    assert rows[store["c"]]["closure_size"] == nar[store["c"]] + nar[store["d"]]
    order = [r["added_size"] for r in report["paths"]]
    assert order == sorted(order, reverse=True)


def test_multiple_outputs_and_self_reference(store):
    info = path_info(store["torch"])
    assert store["blas.lib"] in info
    assert store["blas.dev"] not in info and store["blas.out"] not in info
    assert store["blas.lib"] in info[store["blas.lib"]]["references"]  # the self-reference
    _, report = cli_json("size", store["blas.out"], "--all")
    rows = {r["path"]: r for r in report["paths"]}
    assert set(rows) == {store["blas.out"], store["blas.dev"], store["blas.lib"]}
    assert rows[store["blas.dev"]]["added_size"] == info[store["blas.lib"]]["narSize"] + path_info(
        store["blas.dev"])[store["blas.dev"]]["narSize"]


def _dumps(store, tmp_path):
    """The same closure in the three JSON shapes Nix has printed."""
    by_path = path_info(store["torch"], closure_size=True)
    as_list = [{"path": path, **entry} for path, entry in by_path.items()]
    base = {os.path.basename(k): {**v, "storeDir": os.path.dirname(k),
                                   "references": [os.path.basename(r) for r in v["references"]]}
            for k, v in by_path.items()}
    files = {}
    for name, data in (("list", as_list), ("object", by_path), ("basenames", base)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(data))
    # The registration format, as nixpkgs' closureInfo writes it (no deriver).
    lines = []
    for e in as_list:
        lines += [e["path"], e["narHash"], str(e["narSize"]), "", str(len(e["references"])), *e["references"]]
    files["registration"] = tmp_path / "registration"
    files["registration"].write_text("\n".join(lines) + "\n")
    return files


def test_path_info_dumps_in_every_shape(store, tmp_path):
    _, direct = cli_json("why", store["torch"])
    for name, file in _dumps(store, tmp_path).items():
        if name == "registration":  # no NAR sizes' closure figures, same graph
            p, report = cli_json("why", "--path-info", str(file))
            assert report["findings"] == direct["findings"]
            continue
        p, report = cli_json("why", "--path-info", str(file))
        assert p.returncode == 1, name
        assert report["findings"] == direct["findings"], name
        _, sizes = cli_json("size", str(file))  # a dump given as the target
        assert sizes["summary"]["closure_size"] == direct["summary"]["closure_size"], name
        budgets = tmp_path / "budgets.toml"  # and to gate as a target, as to every closure command
        budgets.write_text(f'[targets.t]\nmax-closure-size = "{1 << 40}"\n')
        _, gated = cli_json("gate", "--budgets", str(budgets), "--target", f"t={file}")
        assert gated["targets"][0]["closure_size"] == direct["summary"]["closure_size"], name


def test_dump_of_a_closure_that_is_not_here(store, tmp_path):
    """CI can audit a closure in a binary cache: sizes and chains from the dump,
    evidence marked unavailable."""
    files = _dumps(store, tmp_path)
    data = json.loads(files["object"].read_text())
    fake = os.path.dirname(store["torch"]) + "/" + "0" * 32 + "-cudatoolkit-11.8"
    data[fake] = {"narSize": 1 << 30, "references": []}
    data[store["torch"]]["references"].append(fake)
    files["object"].write_text(json.dumps(data))
    _, report = cli_json("why", "--path-info", str(files["object"]), "cudatoolkit-11*")
    (e,) = report["explanations"]
    assert e["path"] == fake and e["added_size"] == 1 << 30
    hop = e["hops"][0]
    # torch is here and scanned, but holds no such hash: the dump and the store disagree.
    assert hop["from"] == store["torch"] and hop["evidence"] == []
    assert hop["evidence_unavailable"] == "the local copy holds no reference to it"
    data[store["c"]]["references"] = []  # c is here, but pretend d hangs off a path that is not
    del data[store["d"]]
    data[fake]["references"] = [store["d"]]
    data[store["d"]] = {"narSize": 1, "references": []}
    files["object"].write_text(json.dumps(data))
    _, report = cli_json("why", "--path-info", str(files["object"]), "fixture-d")
    (e,) = report["explanations"]
    assert e["chain"] == [store["torch"], fake, store["d"]]
    assert e["hops"][1]["evidence_unavailable"] == "not present in the local store"


def test_nix_store_fallback(store, tmp_path):
    """Without the nix command (nix-command disabled, very old Nix), nix-store."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("nix-store"), bin_dir / "nix-store")
    _, direct = cli_json("size", store["torch"], "--all")
    _, fallback = cli_json("size", store["torch"], "--all", env={"PATH": str(bin_dir)})
    assert fallback["paths"] == direct["paths"]


def test_closure_errors_are_one_line(store, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    cases = [
        (["why", "--path-info", str(bad)], "is not a saved closure (not JSON"),
        (["size", str(tmp_path)], "not in the Nix store"),
        (["size", os.path.dirname(store["torch"]) + "/" + "1" * 32 + "-gone"], "is not in the store"),
        (["why", "--path-info", str(tmp_path / "missing.json")], "path-info dump not found"),
    ]
    for args, message in cases:
        p = run_cli(*args)
        assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    p = run_cli("size", store["torch"], env={"PATH": str(tmp_path)})
    assert p.returncode == 2 and "nix is not installed" in p.stderr


def test_diff(store):
    p, report = cli_json("diff", store["torch"], store["torch2"])
    packages = {(x["name"], x["output"]): x for x in report["packages"]}
    assert packages[("torch", "out")]["status"] == "changed"
    assert packages[("torch", "out")]["old_versions"] == ["2.9.0"]
    assert packages[("torch", "out")]["new_versions"] == ["2.9.1"]
    assert packages[("magma", "out")]["status"] == "removed"
    assert packages[("fixture-blas", "lib")]["status"] == "removed"
    assert packages[("nccl", "static")]["status"] == "added"
    assert ("cudatoolkit", "out") not in packages  # unchanged
    # The new closure gains a forbidden path (a -static output); the old one's
    # forbidden paths are not news.
    assert [f["file"] for f in report["findings"]] == [store["nccl"]] and p.returncode == 1
    s = report["summary"]
    assert s["delta"] == s["new_size"] - s["old_size"]
    assert sum(x["delta"] for x in report["packages"]) == s["delta"]


BUDGETS = """
schema = "closure-audit-budgets/1"

[defaults]
max-added-size = "1 GiB"

[targets.torch]
max-closure-size = "{max_size}"
max-growth = "{growth}"
baseline = "{baseline}"
allow = {allow}
"""


def test_gate(store, tmp_path):
    info = path_info(store["torch"])
    total = sum(e["narSize"] for e in info.values())
    baseline = tmp_path / "baseline.json"
    _, size_report = cli_json("size", store["torch"])
    baseline.write_text(json.dumps(size_report))
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(BUDGETS.format(max_size=total, growth="5%", baseline="baseline.json",
                                      allow='["magma-*", "cudatoolkit-*"]'))
    p, report = cli_json("gate", "--budgets", str(budgets), "--target", f"torch={store['torch']}")
    assert p.returncode == 0, report["findings"]
    (t,) = report["targets"]
    assert t["closure_size"] == total and t["baseline_size"] == total and t["passed"]

    # Over budget, grown past 0 bytes against a smaller baseline, forbidden
    # paths, one path adding too much: every rule fires, in one run.
    size_report["summary"]["closure_size"] = total - 1000
    baseline.write_text(json.dumps(size_report))
    budgets.write_text(BUDGETS.format(max_size=total - 1, growth="0 B", baseline="baseline.json", allow="[]")
                       .replace('"1 GiB"', "10000"))
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    md = tmp_path / "gate.md"
    p, report = cli_json("gate", "--budgets", str(budgets), "--target", f"torch={store['torch']}",
                         "--markdown", str(md), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert p.returncode == 1
    rules = sorted({f["rule"] for f in report["findings"]})
    assert rules == ["added-size-budget", "closure-budget", "closure-growth", "forbidden-path"]
    assert all(f["target"] == "torch" for f in report["findings"])
    growth = next(f for f in report["findings"] if f["rule"] == "closure-growth")
    assert (growth["closure_size"], growth["baseline_size"], growth["limit"]) == (total, total - 1000, 0)
    nar = {p: e["narSize"] for p, e in info.items()}
    added_by = {p: nar[p] for p in nar}
    added_by[store["c"]] = nar[store["c"]] + nar[store["d"]]  # c dominates d (see the diamond)
    expected = {p for p, s in added_by.items() if p != store["torch"] and s > 10000}
    assert {f["file"] for f in report["findings"] if f["rule"] == "added-size-budget"} == expected
    text = md.read_text()
    assert text.startswith("## closure-audit gate: ❌ failed") and "`closure-budget`" in text
    # One byte over reads as over: sizes that round alike are written in bytes.
    over = next(f for f in report["findings"] if f["rule"] == "closure-budget")["message"]
    assert f"closure is {total:,} bytes, over its budget of {total - 1:,} bytes" in over, over
    # The growth limit and the baseline can come from the command line (as CI passes them).
    budgets.write_text(f'[targets.torch]\nmax-closure-size = "{total}"\nallow = ["*"]\n')
    p, report = cli_json("gate", "--budgets", str(budgets), "--target", f"torch={store['torch']}",
                         "--max-growth", "torch=500", "--baseline", f"torch={baseline}")
    assert p.returncode == 1 and [f["rule"] for f in report["findings"]] == ["closure-growth"]
    assert report["findings"][0]["limit"] == 500
    assert summary.read_text().startswith("earlier step\n## closure-audit gate")


def test_gate_fails_closed(store, tmp_path):
    budgets = tmp_path / "budgets.toml"
    cases = {
        "growth without baseline": ('[targets.t]\nmax-growth = "5%"\n', "needs a baseline"),
        "missing baseline": ('[targets.t]\nmax-growth = "5%"\nbaseline = "nope.json"\n', "nope.json"),
        "unknown key": ('[targets.t]\nmax-closure = "5 GiB"\n', "unknown key 'max-closure'"),
        "bad size": ('[targets.t]\nmax-closure-size = "lots"\n', "not a size"),
        "no targets": ('schema = "closure-audit-budgets/1"\n', "needs a [targets.<name>] table"),
        "no closure": ('[targets.t]\nmax-closure-size = "5 GiB"\n', "no installable, path or path-info"),
        "closure in defaults": ('[defaults]\npath = "/nix/store/x"\n[targets.t]\n',
                                "defaults.path: a closure to gate goes in its [targets.<name>] table"),
    }
    for name, (text, message) in cases.items():
        budgets.write_text(text)
        args = ["gate", "--budgets", str(budgets)]
        if name != "no closure" and name != "no targets":
            args += ["--target", f"t={store['torch']}"]
        p = run_cli(*args)
        assert p.returncode == 2 and message in p.stderr, (name, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, name
    budgets.write_text('[targets.t]\nmax-closure-size = "5 GiB"\n')
    p = run_cli("gate", "--budgets", str(budgets), "--target", f"t={store['torch']}", "--max-growth", "t=5%")
    assert p.returncode == 2 and "needs a baseline" in p.stderr
    p = run_cli("gate", "--budgets", str(budgets), "--target", f"t={store['torch']}", "--max-growth", "t=lots")
    assert p.returncode == 2 and "--max-growth" in p.stderr
    p = run_cli("gate", "--budgets", str(budgets), "--target", f"t={tmp_path}")
    assert p.returncode == 2 and "not in the Nix store" in p.stderr
    p = run_cli("gate", "--budgets", str(budgets), "--target", "nope=/x")
    assert p.returncode == 2 and "no target named 'nope'" in p.stderr


def test_installables_are_resolved_never_built_without_build(tmp_path):
    """A flake installable: nix path-info resolves it; it is built only on --build."""
    flake = tmp_path / "flake"
    flake.mkdir()
    (flake / "flake.nix").write_text(f"""{{
  outputs = {{ self }}: {{
    packages.x86_64-linux.default = builtins.derivation {{
      name = "fixture-installable-{os.getpid()}"; system = "x86_64-linux"; builder = "/bin/sh";
      PATH = "/usr/bin:/bin"; args = [ "-ec" "mkdir $out; echo x > $out/x" ];
    }};
  }};
}}
""")
    installable = f"path:{flake}#default"
    p = run_cli("size", installable)
    assert p.returncode == 2 and "pass --build" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p, report = cli_json("size", installable, "--build")
    (root,) = report["target"]
    assert root.endswith(f"-fixture-installable-{os.getpid()}") and report["summary"]["paths"] == 1
    p, again = cli_json("size", installable)  # built now: resolved without --build
    assert again["target"] == [root]
    # audit and doctor read installables through the same resolver
    for command in (["audit"], ["doctor", "--host-root", str(tmp_path)]):
        p, report = cli_json(*command, installable)
        assert report["target"] == [root], command


def test_a_file_that_is_no_closure_says_what_a_target_may_be(tmp_path):
    nix_file = tmp_path / "default.nix"
    nix_file.write_text("{ pkgs ? import <nixpkgs> {} }: pkgs.hello\n")
    p = run_cli("size", str(nix_file))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "a target is a store path, a result link, an installable (.#attr)" in p.stderr
    assert f"nix-build {nix_file}" in p.stderr
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    p = run_cli("size", "--path-info", str(empty))
    assert p.returncode == 2 and "no store paths" in p.stderr


def _forbidden(report: dict) -> list:
    return sorted((f["file"], f["pattern"], tuple(f["chain"])) for f in report["findings"]
                  if f["rule"] == "forbidden-path")


def test_audit_reports_the_forbidden_paths_why_reports(store, tmp_path):
    """A store path, a result link, a saved closure: audit finds what why finds, with the chain."""
    _, why = cli_json("why", store["torch"])
    p, audit = cli_json("audit", store["torch"])
    assert p.returncode == 1 and _forbidden(audit) == _forbidden(why)
    assert {f[1] for f in _forbidden(audit)} == {"cudatoolkit-*", "magma-*"}
    hops = next(f["hops"] for f in audit["findings"] if f.get("pattern") == "magma-*")
    assert hops[0]["evidence"][0]["file"] == "share/cmake/TorchConfig.cmake"
    os.symlink(store["torch"], tmp_path / "result")
    _, via_link = cli_json("audit", str(tmp_path / "result"))
    assert _forbidden(via_link) == _forbidden(why)
    dump = tmp_path / "closure.json"
    dump.write_text(json.dumps(path_info(store["torch"])))
    _, via_dump = cli_json("audit", store["torch"], "--path-info", str(dump))
    assert _forbidden(via_dump) == _forbidden(why)
    text = run_cli("audit", store["torch"])
    assert text.returncode == 1 and "forbidden (magma-*)" in text.stdout and "TorchConfig.cmake" in text.stdout


def test_audit_of_an_installable(tmp_path):
    flake = tmp_path / "flake"
    flake.mkdir()
    (flake / "flake.nix").write_text(f"""{{
  outputs = {{ self }}: rec {{
    packages.x86_64-linux.magma = builtins.derivation {{
      name = "magma-2.7.2"; system = "x86_64-linux"; builder = "/bin/sh";
      PATH = "/usr/bin:/bin"; args = [ "-ec" "mkdir $out; echo {os.getpid()} > $out/x" ];
    }};
    packages.x86_64-linux.default = builtins.derivation {{
      name = "fixture-app-{os.getpid()}"; system = "x86_64-linux"; builder = "/bin/sh";
      PATH = "/usr/bin:/bin"; magma = packages.x86_64-linux.magma;
      args = [ "-ec" "mkdir -p $out/bin; cp /bin/true $out/bin/app; echo $magma > $out/magma-root" ];
    }};
  }};
}}
""")
    p, report = cli_json("audit", f"path:{flake}#default", "--build")
    assert p.returncode == 1 and [f[1] for f in _forbidden(report)] == ["magma-*"]
    assert report["target"][0].endswith(f"-fixture-app-{os.getpid()}")


PREFIXED = r"""
rec {
  nvcc = clib "cuda12.9-cuda_nvcc-12.9.86" "libnvptxcompiler.so" "int ptx(void) { return 1; }" "";
  # A runpath to the compiler's lib/ that resolves nothing: the only reference.
  app = clib "app-1.0" "libapp.so" "int app(void) { return 0; }" "-Wl,--enable-new-dtags,-rpath,${nvcc}/lib";
}
"""


@pytest.fixture(scope="module")
def prefixed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prefixed")
    return {name: nix_build(tmp, PREFIXED, attr=name)[0] for name in ("nvcc", "app")}


def test_why_matches_a_bare_word_after_the_release_prefix(prefixed):
    p, report = cli_json("why", prefixed["app"], "cuda_nvcc")
    assert p.returncode == 0
    (e,) = report["explanations"]
    assert e["path"] == prefixed["nvcc"] and e["chain"] == [prefixed["app"], prefixed["nvcc"]]
    # Labelled with the policy pattern that forbids it, not with the query.
    assert (e["pattern"], e["reason"]) == ("cuda*-cuda_nvcc-*", "the CUDA compiler")
    assert [h["kind"] for h in e["hops"][0]["evidence"]] == ["runpath-unused"]
    # A prefix is not a word boundary anywhere else.
    assert run_cli("why", prefixed["app"], "nvcc").returncode == 1


def test_why_suggests_shrinking_a_runpath_that_is_all_unused(prefixed, store):
    p = run_cli("why", prefixed["app"], "cuda_nvcc")
    assert "forbidden (cuda*-cuda_nvcc-*): the CUDA compiler" in p.stdout, p.stdout
    assert f"patchelf --shrink-rpath {prefixed['app']}/lib/libapp.so" in p.stdout, p.stdout
    # torch's runpath to cudatoolkit is used by one library: no such advice.
    p = run_cli("why", store["torch"], "cudatoolkit")
    assert "forbidden (cudatoolkit-*)" in p.stdout and "shrink-rpath" not in p.stdout, p.stdout


def test_a_terminal_shows_the_first_chains_and_json_every_one(tmp_path):
    """why and gate print the first MAX_ROWS chains, as a findings table its
    first rows, and say how many more --json lists: a closure with a
    thousand forbidden paths printed ten thousand lines."""
    from closure_audit.output.terminal import MAX_ROWS

    forbidden = [f"/nix/store/{'%032d' % i}-cudatoolkit-12.{i}" for i in range(MAX_ROWS + 5)]
    root = f"/nix/store/{'z' * 32}-env"
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({root: {"narSize": 1, "references": forbidden},
                                **{p: {"narSize": 1, "references": []} for p in forbidden}}))
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(f'[targets.t]\npath-info = "{dump}"\n')
    for args in (("why", str(dump)), ("gate", "--budgets", str(budgets))):
        p = run_cli(*args)
        assert p.returncode == 1, p.stderr
        assert p.stdout.count("forbidden (cudatoolkit-*)") == MAX_ROWS, p.stdout
        assert "… 5 more chains (--json lists all)" in p.stdout
        _, report = cli_json(*args)
        assert sum(f["rule"] == "forbidden-path" and "chain" in f for f in report["findings"]) == MAX_ROWS + 5


def test_a_dump_is_read_alike_from_a_file_a_pipe_and_a_registration(tmp_path):
    """A regular file is mapped into memory; a pipe (`--path-info /dev/stdin`,
    a shell's `<(nix path-info ...)`) and an empty file cannot be, and are
    read. Each gives the same report, or the same one-line error."""
    paths = [f"/nix/store/{c * 32}-pkg-{k}" for k, c in enumerate("abc")]
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({p: {"narSize": 10 + k, "references": paths[k + 1:k + 2]}
                                for k, p in enumerate(paths)}))
    from_file = run_cli("size", "--path-info", str(dump), "--json")
    assert from_file.returncode == 0, from_file.stderr
    from_pipe = run_cli("size", "--path-info", "/dev/stdin", "--json", input=dump.read_text())
    assert from_pipe.returncode == 0, from_pipe.stderr
    strip = lambda text: {k: v for k, v in json.loads(text).items() if k != "target"}  # noqa: E731
    assert strip(from_pipe.stdout) == strip(from_file.stdout)
    assert json.loads(from_file.stdout)["summary"]["closure_size"] == 33
    # The registration format (nix-store --dump-db), mapped too.
    registration = tmp_path / "registration"
    registration.write_text("".join(f"{p}\nsha256:0\n{10 + k}\n\n{len(paths[k + 1:k + 2])}\n"
                                    + "".join(f"{r}\n" for r in paths[k + 1:k + 2]) for k, p in enumerate(paths)))
    p = run_cli("size", "--path-info", str(registration), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["summary"]["closure_size"] == 33
    empty = tmp_path / "empty"
    empty.write_text("")
    for given in (str(empty), "/dev/stdin"):
        p = run_cli("size", "--path-info", given, input="")
        assert p.returncode == 2 and "is empty" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
