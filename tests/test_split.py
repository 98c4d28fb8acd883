"""hooks/split-redist-outputs.sh: alone on a redist-layout tree, and inside a
real multi-output Nix build, whose consumer closure closure-audit checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import redist_fixture
from conftest import ROOT, run_cli
from nixstore import needs_nix, nix_build, path_info

HOOK = ROOT / "hooks/split-redist-outputs.sh"
ALL = ["out", "lib", "static", "dev", "stubs", "bin", "doc", "samples"]


def split(tmp_path: Path, tree: Path, outputs: list[str], env: dict | None = None, strict: bool = True):
    """Copy `tree` into a fresh $out and run the hook, as the builder does."""
    dirs = {o: tmp_path / "outputs" / o for o in outputs}
    if dirs["out"].exists():
        shutil.rmtree(tmp_path / "outputs")
    shutil.copytree(tree, dirs["out"], symlinks=True)
    for o, d in dirs.items():
        d.mkdir(parents=True, exist_ok=True)
    e = {"PATH": os.environ["PATH"], "outputs": " ".join(outputs), **{o: str(d) for o, d in dirs.items()}}
    if strict:
        e["splitRedistStrict"] = "1"
    e.update(env or {})
    p = subprocess.run(["bash", "-c", f'set -euo pipefail; source "{HOOK}"; splitRedistOutputs; propagateRedistOutputs'],
                       env=e, capture_output=True, text=True, timeout=120)
    return p, dirs


def contents(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if (p.is_file() or p.is_symlink())
            and not str(p.relative_to(d)).startswith("nix-support")}


@pytest.fixture
def tree(tmp_path, objects):
    return redist_fixture.make_tree(tmp_path / "src", objects)


def test_every_file_lands_in_its_output(tmp_path, tree):
    p, dirs = split(tmp_path, tree, ALL)
    assert p.returncode == 0, p.stderr
    for rel, output in redist_fixture.EXPECTED.items():
        assert rel in contents(dirs[output or "out"]), (rel, output)
    assert contents(dirs["out"]) == {r for r, o in redist_fixture.EXPECTED.items() if o is None}
    assert os.readlink(dirs["lib"] / "lib/libdemo.so") == "libdemo.so.13"  # links keep working
    # Propagation: dev brings lib and bin, never static or stubs; out brings dev.
    dev_props = (dirs["dev"] / "nix-support/propagated-build-inputs").read_text().split()
    assert dev_props == [str(dirs["lib"]), str(dirs["bin"])]
    assert (dirs["out"] / "nix-support/propagated-build-inputs").read_text().split() == [str(dirs["dev"])]
    propagated = [x for d in dirs.values() if (d / "nix-support/propagated-build-inputs").exists()
                  for x in (d / "nix-support/propagated-build-inputs").read_text().split()]
    assert str(dirs["static"]) not in propagated and str(dirs["stubs"]) not in propagated


def test_the_split_agrees_with_redist_features(tmp_path, tree):
    from redist_features.inspect import inspect

    expected = inspect(str(tree.parent)).outputs
    p, dirs = split(tmp_path, tree, ["out"] + expected)
    assert p.returncode == 0, p.stderr
    assert [o for o in expected if contents(dirs[o])] == expected


def test_an_empty_declared_output_fails(tmp_path, tree):
    shutil.rmtree(tree / "samples")
    p, _ = split(tmp_path, tree, ALL)
    assert p.returncode != 0 and "splitRedistOutputs: declared output 'samples' is empty" in p.stderr


def test_undeclared_output(tmp_path, tree):
    outputs = [o for o in ALL if o != "stubs"]
    p, _ = split(tmp_path, tree, outputs)
    assert p.returncode != 0 and "lib/stubs/libcuda.so (stubs)" in p.stderr
    p, dirs = split(tmp_path, tree, outputs, strict=False)
    assert p.returncode == 0 and "warning: kept in out" in p.stderr
    assert "lib/stubs/libcuda.so" in contents(dirs["out"])


def test_fhs_paths_fail_unless_allowed(tmp_path, tree):
    (tree / "lib/pkgconfig/demo.pc").write_text("prefix=/usr/local/cuda\n")
    p, _ = split(tmp_path, tree, ALL)
    assert p.returncode != 0 and "FHS paths (/usr/...) in:" in p.stderr and "demo.pc" in p.stderr
    p, _ = split(tmp_path, tree, ALL, env={"allowFHSReferences": "1"})
    assert p.returncode == 0, p.stderr


def test_a_link_the_split_would_break_fails(tmp_path, tree):
    os.symlink("../doc/manual.txt", tree / "lib/libmanual.so")
    p, _ = split(tmp_path, tree, ALL)
    assert p.returncode != 0 and "symlinks left dangling by the split" in p.stderr


def test_opt_out(tmp_path, tree):
    p, dirs = split(tmp_path, tree, ALL, env={"dontSplitRedistOutputs": "1"})
    assert p.returncode == 0 and contents(dirs["lib"]) == set()


SPLIT_BUILD = r"""
let
  pkg = builtins.derivation {
    name = "cuda13.0-libdemo-13.0.1"; inherit system; builder = "/bin/bash";
    outputs = [ "out" "lib" "static" "dev" "stubs" "bin" "doc" "samples" ];
    PATH = "/usr/local/bin:/usr/bin:/bin"; src = @ARCHIVE@; hook = @HOOK@; splitRedistStrict = "1";
    args = [ "-euo" "pipefail" "-c" ''
      mkdir -p $out && tar -xJf $src -C $out --strip-components=1
      source $hook
      splitRedistOutputs
      propagateRedistOutputs
    '' ];
  };
  # Links against the library and records only its lib output.
  consumer = builtins.derivation {
    name = "consumer-1.0"; inherit system; builder = "/bin/bash";
    PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-euo" "pipefail" "-c" ''
      mkdir -p $out/bin
      echo 'int main(void) { return 0; }' > m.c
      gcc -o $out/bin/app m.c -L${pkg.lib}/lib -l:libdemo.so.13 -I${pkg.dev}/include \
        -Wl,--no-as-needed,--enable-new-dtags,-rpath,${pkg.lib}/lib
    '' ];
  };
in [ consumer pkg.out pkg.lib pkg.static pkg.dev pkg.stubs pkg.bin pkg.doc pkg.samples ]
"""


@needs_nix
def test_inside_a_nix_build_and_the_consumer_closure(tmp_path, tree):
    archive = redist_fixture.pack(tree, tmp_path)
    paths = nix_build(tmp_path, SPLIT_BUILD.replace("@ARCHIVE@", str(archive)).replace("@HOOK@", str(HOOK)))
    consumer, *outs = paths
    out = dict(zip(["out", "lib", "static", "dev", "stubs", "bin", "doc", "samples"], outs))
    for rel, output in redist_fixture.EXPECTED.items():
        assert (Path(out[output or "out"]) / rel).exists() or (Path(out[output or "out"]) / rel).is_symlink(), rel
    # The consumer's runtime closure: the lib output, nothing of dev, static or stubs.
    closure = set(path_info(consumer))
    assert out["lib"] in closure
    assert not closure & {out["dev"], out["static"], out["stubs"], out["out"]}
    p = run_cli("why", consumer, "--json")
    report = json.loads(p.stdout)
    assert p.returncode == 0 and report["findings"] == []
    # Depending on out still gives the whole package, through propagation.
    outs_of_out = set(path_info(out["out"]))
    assert {out["dev"], out["lib"], out["bin"]} <= outs_of_out and out["static"] not in outs_of_out
    p = run_cli("why", out["out"], "--json")
    assert [f["file"] for f in json.loads(p.stdout)["findings"]] == []
    p = run_cli("why", out["static"], "--json")  # a -static output in a closure is forbidden
    assert [f["pattern"] for f in json.loads(p.stdout)["findings"]] == ["*-static"]
