"""hooks/auto-add-opengl-runpath-hook.sh on real files with real patchelf:
alone, under `set -u`, and inside a real Nix build."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from contract_eval import hook_environment
from closure_audit.elf.reader import read_elf
from hookfile import DRIVER_LINK, runpath_hook  # noqa: F401 (a fixture)
from nixstore import needs_nix, nix_build
from parts import needs

DRIVER = f"{DRIVER_LINK}/lib"

pytestmark = needs("patchelf", shutil.which("patchelf") is not None)


def run_hook(hook: Path, outputs: dict[str, Path], env: dict | None = None, script: str = "autoAddOpenGLRunpath",
             structured: bool = False):
    """Source the hook in plain bash, strict mode, and run it over `outputs`;
    `structured`: the outputs as __structuredAttrs gives them."""
    given, declare = hook_environment(outputs, structured)
    e = {"PATH": os.environ["PATH"], **given}
    e.update(env or {})
    return subprocess.run(["bash", "-c", f'set -euo pipefail; {declare}source "{hook}"; {script}'], env=e,
                          capture_output=True, text=True, timeout=120)


def runpath(path) -> str | None:
    e = read_elf(str(path))
    return e.runpath if e.runpath is not None else e.rpath


@pytest.fixture
def tree(build, objects):
    """Every kind of file the hook meets, in two outputs."""
    out, lib = build.root / "out", build.root / "lib"
    dep = build.lib("lib/lib/libdep.so")
    build.exe("out/bin/app", links=[dep], runpath=["/nix/store/aaaa-dep/lib", "/nix/store/bbbb-cuda/lib/stubs",
                                                   "/nix/store/cccc-x/lib"])
    build.lib("lib/lib/libplain.so")
    build.lib("lib/lib/libpatched.so", runpath=[DRIVER, "/nix/store/dddd/lib"])
    build.lib("lib/lib/libdriverlast.so", runpath=["/nix/store/dddd/lib", DRIVER])
    build.lib("lib/lib32/libsmall.so", m32=True, runpath=["/nix/store/eeee/lib"])
    build.exe("out/bin/static", static=True)
    ro = build.lib("lib/lib/libreadonly.so", runpath=["/nix/store/ffff/lib"])
    os.chmod(ro, 0o555)
    subprocess.run(["ar", "rcs", str(lib / "lib/libstatic.a"), str(objects["empty"])], check=True)
    shutil.copy(objects["empty"], lib / "lib/object.o")
    (out / "bin/script").write_text("#!/bin/sh\necho hi\n")
    os.chmod(out / "bin/script", 0o755)
    os.symlink("libplain.so", lib / "lib/libplain.so.1")
    return {"out": out, "lib": lib}


@pytest.mark.parametrize("structured", [False, True], ids=["plain", "structured-attrs"])
def test_every_kind_of_file(runpath_hook, tree, structured):
    out, lib = tree["out"], tree["lib"]
    before = {p: p.read_bytes() for p in (out / "bin/static", lib / "lib/libstatic.a", lib / "lib/object.o",
                                          out / "bin/script")}
    p = run_hook(runpath_hook, tree, structured=structured)
    assert p.returncode == 0, p.stderr
    # The stubs entry is replaced, the others keep their order, the driver comes first.
    assert runpath(out / "bin/app") == f"{DRIVER}:/nix/store/aaaa-dep/lib:/nix/store/cccc-x/lib"
    assert runpath(lib / "lib/libplain.so") == DRIVER
    assert runpath(lib / "lib/libpatched.so") == f"{DRIVER}:/nix/store/dddd/lib"
    assert runpath(lib / "lib/libdriverlast.so") == f"{DRIVER}:/nix/store/dddd/lib"
    assert runpath(lib / "lib32/libsmall.so") == "/run/opengl-driver-32/lib:/nix/store/eeee/lib"
    assert runpath(lib / "lib/libreadonly.so") == f"{DRIVER}:/nix/store/ffff/lib"
    assert os.stat(lib / "lib/libreadonly.so").st_mode & 0o777 == 0o555
    for path, data in before.items():
        assert path.read_bytes() == data, path  # static executable, archive, object, script: untouched
    assert os.path.islink(lib / "lib/libplain.so.1")
    assert not list(lib.rglob(".autoAddOpenGLRunpath.*"))


def test_idempotent(runpath_hook, tree):
    assert run_hook(runpath_hook, tree).returncode == 0
    snapshot = {p: p.read_bytes() for p in tree["lib"].rglob("*") if p.is_file()}
    snapshot.update({p: p.read_bytes() for p in tree["out"].rglob("*") if p.is_file()})
    assert run_hook(runpath_hook, tree).returncode == 0
    for path, data in snapshot.items():
        assert path.read_bytes() == data, path
    assert runpath(tree["lib"] / "lib/libplain.so").count(DRIVER) == 1


@pytest.mark.parametrize("switch", ["dontAutoAddOpenGLRunpath", "dontUseAutoAddDriverRunpath",
                                    "dontUseAutoAddOpenGLRunpath"])
def test_opt_out(runpath_hook, tree, switch):
    """Its own switch, and those of nixpkgs' autoAddDriverRunpath it may stand in for."""
    before = (tree["lib"] / "lib/libplain.so").read_bytes()
    assert run_hook(runpath_hook, tree, env={switch: "1"}).returncode == 0
    assert (tree["lib"] / "lib/libplain.so").read_bytes() == before
    assert run_hook(runpath_hook, tree).returncode == 0 and (tree["lib"] / "lib/libplain.so").read_bytes() != before


def test_a_file_patchelf_cannot_handle_fails_the_build_and_is_left_whole(runpath_hook, tree):
    bad = tree["lib"] / "lib/libbroken.so"
    good = (tree["lib"] / "lib/libplain.so").read_bytes()
    # An ELF shared object header with no program headers behind it.
    bad.write_bytes(good[:18] + b"\0" * 46)
    before = bad.read_bytes()
    p = run_hook(runpath_hook, tree)
    assert p.returncode != 0
    assert f"autoAddOpenGLRunpath: patchelf cannot read the runpath of {bad}" in p.stderr
    assert bad.read_bytes() == before
    assert not list(tree["lib"].rglob(".autoAddOpenGLRunpath.*"))


def test_sourcing_registers_and_runs_nothing(runpath_hook, tree):
    """Sourcing defines the function and appends it to postFixupHooks, as
    nixpkgs' setup.sh sources setup hooks; nothing is patched until fixup."""
    before = (tree["lib"] / "lib/libplain.so").read_bytes()
    p = run_hook(runpath_hook, tree, script='declare -F autoAddOpenGLRunpath; echo "${postFixupHooks[*]}"')
    assert p.returncode == 0 and p.stdout.split() == ["autoAddOpenGLRunpath", "autoAddOpenGLRunpath"]
    assert (tree["lib"] / "lib/libplain.so").read_bytes() == before


@needs_nix
def test_inside_a_nix_build(tmp_path, runpath_hook):
    """Built by Nix: gcc makes the files, the hook patches both outputs."""
    (out, lib) = nix_build(tmp_path, f'''
      let d = builtins.derivation {{
        name = "fixture-hooked"; inherit system; builder = "/bin/bash"; outputs = [ "out" "lib" ];
        PATH = "/usr/local/bin:/usr/bin:/bin"; hook = {runpath_hook};
        args = [ "-euo" "pipefail" "-c" \'\'
          mkdir -p $out/bin $lib/lib
          echo 'int f(void) {{ return 1; }}' > f.c
          gcc -shared -fPIC -o $lib/lib/libf.so f.c -Wl,--enable-new-dtags,-rpath,/nix/store/x-cuda/lib/stubs:$lib/lib
          echo 'int f(void); int main(void) {{ return f(); }}' > m.c
          gcc -o $out/bin/app m.c -L$lib/lib -lf -Wl,--enable-new-dtags,-rpath,$lib/lib
          source $hook
          autoAddOpenGLRunpath
          autoAddOpenGLRunpath
        \'\' ];
      }}; in [ d.out d.lib ]''')
    assert runpath(Path(lib) / "lib/libf.so") == f"{DRIVER}:{lib}/lib"
    assert runpath(Path(out) / "bin/app") == f"{DRIVER}:{lib}/lib"
