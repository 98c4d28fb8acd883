"""hooks/split-redist-outputs.sh: alone on a redist-layout tree, with and
without structured attrs; inside a real multi-output Nix build, whose consumer
closure closure-audit checks; and registered by sourcing, as nixpkgs' stdenv
sources it, in a store build of NVIDIA's real CUDA runtime driven by the
contract stub's stand-in for nixpkgs' setup.sh (runHook, its hook arrays)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import hookfile
import redist_fixture
from conftest import ROOT, run_cli
from contract_eval import PREDICATE, hook_environment
from hookfile import runpath_hook, split_hook  # noqa: F401 (fixtures)
from nixstore import needs_nix, nix_build, path_info
from parts import needs

SETUP = ROOT / "tests/contract/nixpkgs-contract-stub/setup.sh"

ALL = ["out", "lib", "static", "dev", "stubs", "bin", "doc", "samples"]


def split(tmp_path: Path, tree: Path, outputs: list[str], env: dict | None = None, strict: bool = True,
          structured: bool = False):
    """Copy `tree` into a fresh $out and run the hook, as the builder does;
    `structured`: the outputs as __structuredAttrs gives them."""
    dirs = {o: tmp_path / "outputs" / o for o in outputs}
    if dirs["out"].exists():
        shutil.rmtree(tmp_path / "outputs")
    shutil.copytree(tree, dirs["out"], symlinks=True)
    for o, d in dirs.items():
        d.mkdir(parents=True, exist_ok=True)
    given, declare = hook_environment(dirs, structured)
    e = {"PATH": os.environ["PATH"], **given}
    if strict:
        e["splitRedistStrict"] = "1"
    e.update(env or {})
    hook = hookfile.split_substituted(tmp_path)
    p = subprocess.run(["bash", "-c", f'set -euo pipefail; {declare}source "{hook}"; splitRedistOutputs; '
                        "propagateRedistOutputs"], env=e, capture_output=True, text=True, timeout=120)
    return p, dirs


def contents(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if (p.is_file() or p.is_symlink())
            and not str(p.relative_to(d)).startswith("nix-support")}


@pytest.fixture
def tree(tmp_path, objects):
    return redist_fixture.make_tree(tmp_path / "src", objects)


@pytest.mark.parametrize("structured", [False, True], ids=["plain", "structured-attrs"])
def test_every_file_lands_in_its_output(tmp_path, tree, structured):
    p, dirs = split(tmp_path, tree, ALL, structured=structured)
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
    paths = nix_build(tmp_path, SPLIT_BUILD.replace("@ARCHIVE@", str(archive))
                      .replace("@HOOK@", str(hookfile.split_substituted(tmp_path))))
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


def _driver(script: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {"PATH": os.environ["PATH"], **(env or {})}
    return subprocess.run(["bash", "-c", f'source "{SETUP}"; {script}'], env=e, capture_output=True, text=True,
                          timeout=60)


def test_the_stand_in_runs_hooks_as_nixpkgs_runhook_does():
    """runHook NAME: the function NAME (or the string in $NAME), then each
    entry of NAMEHooks, in order, an array that need not be declared; setup.sh
    declares exactly six hook arrays."""
    p = _driver('f() { echo "f $*"; }; preFooHooks+=(f "echo eval"); preFoo() { echo implicit; }; runHook preFoo a b; '
                'postBar="echo from-variable"; runHook postBar; '
                'declare -p preFixupHooks fixupOutputHooks preConfigureHooks postFixupHooks postUnpackHooks '
                'unpackCmdHooks >/dev/null && ! declare -p postInstallHooks 2>/dev/null && echo declared')
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:5] == ["implicit", "f a b", "eval", "from-variable", "declared"]


def test_sourcing_the_hooks_registers_them_where_fixup_runs_them(runpath_hook, split_hook):
    p = _driver(f'source "{split_hook}"; source "{runpath_hook}"; echo "${{preFixupHooks[*]}}|${{postFixupHooks[*]}}"')
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "splitRedistOutputs|propagateRedistOutputs autoAddOpenGLRunpath"


CUDART_BUILD = r"""
let
  nixpkgs = import @STUB@ {
    inherit system; overlays = [ (import @OVERLAYS@).default ]; config = { cudaSupport = true; @PREDICATE@ };
  };
  # The member as pkgs/cuda/redist.nix describes it: its name, outputs, phases, switches.
  member = nixpkgs.cudaPackages_13_0.cuda_cudart;
  a = member.stubArgs;
  attrs = {
    inherit (member) name outputs; inherit system; builder = "/bin/bash";
    args = [ "-c" "source @SETUP@; genericBuild" ];
    PATH = "/usr/local/bin:/usr/bin:/bin"; src = @ARCHIVE@;
    setupHooks = "@HOOK@ @RUNPATH_HOOK@";
    inherit (a) installPhase splitRedistStrict allowFHSReferences;
  };
  pkg = builtins.derivation (attrs // (if @STRUCTURED@ then { __structuredAttrs = true; } else { }));
  # Links against the split runtime and asks it its version: no GPU needed.
  # (cuda_runtime_api.h needs CUDA 13's crt headers, from cuda_crt: the
  # prototype is written out instead.)
  consumer = builtins.derivation {
    name = "cudart-consumer"; inherit system; builder = "/bin/bash";
    PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-euo" "pipefail" "-c" ''
      mkdir -p $out/bin
      test -f ${pkg.dev}/include/cuda_runtime_api.h
      printf '#include <stdio.h>\nint cudaRuntimeGetVersion(int *);\nint main(void) { int v = 0; cudaRuntimeGetVersion(&v); printf("%%d\\n", v); return v == 0; }\n' > m.c
      gcc -o $out/bin/version m.c -L${pkg.lib}/lib -lcudart \
        -Wl,--enable-new-dtags,-rpath,${pkg.lib}/lib
    '' ];
  };
  outs = map (o: pkg.${o}) pkg.outputs;
in { all = [ consumer ] ++ outs; inherit outs; }
"""


def _cudart_build(tmp_path: Path, structured: bool, hook: Path | None = None, consumer: bool = True):
    archive = redist_fixture.installed_to_redist("nvidia-cuda-runtime", "cuda_cudart", tmp_path)
    expr = (CUDART_BUILD.replace("@STUB@", str(ROOT / "tests/contract/nixpkgs-contract-stub"))
            .replace("@OVERLAYS@", str(ROOT / "overlays")).replace("@PREDICATE@", PREDICATE.replace("./", f"{ROOT}/"))
            .replace("@SETUP@", str(SETUP)).replace("@ARCHIVE@", str(archive)).replace("@HOOK@", str(hook or hookfile.split_substituted(tmp_path)))
            .replace("@RUNPATH_HOOK@", str(hookfile.substituted(tmp_path))).replace("@STRUCTURED@", "true" if structured else "false"))
    if not consumer:
        return None, dict(zip(["out", "lib", "static", "dev"], nix_build(tmp_path, expr, attr="outs")))
    program, *paths = nix_build(tmp_path, expr, attr="all")
    return program, dict(zip(["out", "lib", "static", "dev"], paths))


def _cudart_installed() -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return distribution("nvidia-cuda-runtime") is not None
    except PackageNotFoundError:
        return False


needs_cudart = needs("NVIDIA's CUDA runtime wheel (ci/setup installs nvidia-cuda-runtime)", _cudart_installed())


@needs_nix
@needs_cudart
@pytest.mark.parametrize("structured", [False, True], ids=["plain", "structured-attrs"])
def test_a_real_redistributable_split_in_a_store_build(tmp_path, structured):
    """NVIDIA's CUDA runtime 13.0, built as the overlay's cuda_cudart member
    describes it, by the stand-in for nixpkgs' generic builder: the hooks are
    only sourced; fixupPhase's runHook preFixup and postFixup run them."""
    consumer, out = _cudart_build(tmp_path, structured)
    assert sorted(os.listdir(out["lib"] + "/lib")) == ["libcudart.so", "libcudart.so.13"]
    assert sorted(os.listdir(out["static"] + "/lib")) == ["libcudadevrt.a", "libcudart_static.a"]
    assert (Path(out["dev"]) / "include/cuda_runtime_api.h").is_file()
    assert sorted(os.listdir(out["out"])) == ["LICENSE", "nix-support"]
    # dev brings lib; out brings dev; static never.
    assert (Path(out["dev"]) / "nix-support/propagated-build-inputs").read_text().split() == [out["lib"]]
    assert (Path(out["out"]) / "nix-support/propagated-build-inputs").read_text().split() == [out["dev"]]
    # The driver's directory, from the runpath hook in postFixup.
    from closure_audit.elf.reader import read_elf

    assert read_elf(out["lib"] + "/lib/libcudart.so.13").runpath.split(":")[0] == "/run/opengl-driver/lib"
    # A program linked against it runs, and its closure holds the lib output only.
    version = subprocess.run([consumer + "/bin/version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == "13000"
    closure = set(path_info(consumer))
    assert out["lib"] in closure and not closure & {out["dev"], out["static"], out["out"]}


@needs_nix
@needs_cudart
def test_a_hook_waiting_for_an_array_setup_sh_never_declares_does_nothing(tmp_path):
    """The control: registered only where postInstallHooks is declared (as
    before), the split never runs under nixpkgs' setup.sh, and the runtime
    stays in out."""
    hook = tmp_path / "guarded.sh"
    split_hook = hookfile.split_substituted(tmp_path).read_text()
    text = split_hook.replace(
        "preFixupHooks+=(splitRedistOutputs)\npostFixupHooks+=(propagateRedistOutputs)",
        "if declare -p postInstallHooks >/dev/null 2>&1; then\n"
        "  postInstallHooks+=(splitRedistOutputs)\n  postFixupHooks+=(propagateRedistOutputs)\nfi")
    assert text != split_hook
    hook.write_text(text)
    _, out = _cudart_build(tmp_path, structured=False, hook=hook, consumer=False)
    assert (Path(out["out"]) / "lib/libcudart.so.13").is_file() and os.listdir(out["lib"]) == []
