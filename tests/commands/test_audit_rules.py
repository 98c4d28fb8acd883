"""Every rule of `closure-audit audit`, on trees built for it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from audits import audit, host_policy, rules
from conftest import validate
from parts import require
from closure_audit.errors import TargetError
from closure_audit.policy.load import parse_policy

pytestmark = pytest.mark.fhs


@pytest.fixture
def venv(build):
    """A torch-shaped tree: an extension module, libraries reached through
    $ORIGIN-relative RPATHs, and a CUDA runtime in an NVIDIA-style directory."""
    cudart = build.lib("site-packages/nvidia/cu13/lib/libcudart.so.13")
    torch = build.lib("site-packages/torch/lib/libtorch_cuda.so", links=[cudart],
                      rpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN"])
    build.lib("site-packages/torch/_C.so", links=[torch], rpath=["$ORIGIN/lib"])
    return build


def test_clean_tree_has_no_errors(venv):
    r = audit(venv.root)
    assert r.mode == "tree" and not r.failed, [f.message for f in r.findings]
    assert r.elf_files == 3 and r.entry_points == [str(venv.root / "site-packages/torch/_C.so")]


def test_missing_cudart_is_not_hidden_by_the_host(venv, tmp_path):
    """The classic: the NVIDIA wheel is gone, the host has a CUDA install."""
    host = tmp_path / "host"
    host.mkdir()
    shutil.copy(venv.root / "site-packages/nvidia/cu13/lib/libcudart.so.13", host)
    os.unlink(venv.root / "site-packages/nvidia/cu13/lib/libcudart.so.13")
    report = audit(venv.root, policy=host_policy(host))
    r = rules(report)
    (f,) = r["cuda-library-from-host"]
    assert f.severity == "error" and f.fields["needed"] == "libcudart.so.13" and report.failed
    assert f.fields["host_path"] == str(host / "libcudart.so.13")
    assert f.file == str(venv.root / "site-packages/torch/lib/libtorch_cuda.so")
    assert "resolved-on-host" not in r
    # A policy may allow it from the host, explicitly.
    allowed = host_policy(host, **{"allowed-libraries": ["libcudart.so.*"]})
    assert "cuda-library-from-host" not in rules(audit(venv.root, policy=allowed))
    # Without it on the host either: an error naming every directory searched.
    os.unlink(host / "libcudart.so.13")
    r = rules(audit(venv.root, policy=host_policy(host)))
    (f,) = r["unresolved-library"]
    assert f.severity == "error" and f.fields["needed"] == "libcudart.so.13"
    assert str(venv.root / "site-packages/torch/lib/../../nvidia/cu13/lib") in f.fields["searched"]
    assert str(host) in f.fields["searched"]
    assert f.fields["chain"] == [str(venv.root / "site-packages/torch/_C.so"),
                                 str(venv.root / "site-packages/torch/lib/libtorch_cuda.so")]


OPENS = r"""
#include <dlfcn.h>
int open_it(void) { return dlopen("%s", RTLD_NOW) != 0; }
"""


def test_cuda_library_from_host_counts_every_object_and_names_the_wheel(build, tmp_path):
    """Two libraries need libcudart.so.13 and only the host has it: one
    finding that counts both and names the wheel. CUPTI's
    dlopen("libcudart.so") in a tree holding only libcudart.so.13 maps the
    host's development link: a second CUDA runtime in the process, the same
    finding."""
    host = tmp_path / "host"
    host.mkdir()
    cudart = build.lib("cudart/libcudart.so.13")
    shutil.move(cudart, host / "libcudart.so.13")
    os.symlink("libcudart.so.13", host / "libcudart.so")
    for name in ("libtorch_cuda.so", "libc10_cuda.so"):
        build.lib(f"site-packages/torch/lib/{name}", links=[host / "libcudart.so.13"], runpath=["$ORIGIN"])
    report = audit(build.root / "site-packages", policy=host_policy(host))
    (f,) = rules(report)["cuda-library-from-host"]
    assert f.fields["objects"] == [str(build.root / f"site-packages/torch/lib/{n}")
                                   for n in ("libc10_cuda.so", "libtorch_cuda.so")]
    assert "2 objects need it" in f.message and "nvidia-cuda-runtime wheel" in f.message
    assert "cuda_cudart redistributable" in f.message

    tree = tmp_path / "pip"
    rt = tree / "nvidia/cu13/lib/libcudart.so.13"
    rt.parent.mkdir(parents=True)
    shutil.copy(host / "libcudart.so.13", rt)
    src = tmp_path / "cupti.c"
    src.write_text(OPENS % "libcudart.so")
    cupti = tree / "nvidia/cu13/lib/libcupti.so.13"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(cupti), str(src), "-Wl,-soname,libcupti.so.13",
                    "-Wl,--no-as-needed", str(rt), "-Wl,--enable-new-dtags,-rpath,$ORIGIN"], check=True)
    report = audit(tree, policy=host_policy(host))
    (f,) = rules(report)["cuda-library-from-host"]
    assert (f.file, f.fields["needed"], f.fields["host_path"]) == (str(cupti), "libcudart.so", str(host / "libcudart.so"))
    assert f.fields["opened"][0]["string"] == "libcudart.so" and report.failed
    assert "beside the tree's own copy" in f.message
    # Without the host's link, dlopen fails: a fallback, info. CUPTI's own
    # libcudart.so.13 comes through DT_RUNPATH, which an LD_LIBRARY_PATH to the
    # host's copy would beat: info too.
    os.unlink(host / "libcudart.so")
    report = audit(tree, policy=host_policy(host))
    assert [(f.rule, f.severity) for f in report.findings] == [("dlopen-fallback-name", "info"),
                                                               ("runpath-shadowable", "info")]


def test_a_plugins_unresolved_needs_are_warnings_naming_its_feature(build, tmp_path):
    """NVSHMEM's MPI bootstrap needs libmpi, which a stock install lacks; only
    libnvshmem_host opens it, when NVSHMEM runs over MPI."""
    gone = build.lib("gone/libmpi.so.40")
    lib = build.path("nvidia/nvshmem/lib")
    boot = build.lib("nvidia/nvshmem/lib/nvshmem_bootstrap_mpi.so.3", links=[gone], runpath=["$ORIGIN"])
    src = tmp_path / "host.c"
    src.write_text(OPENS % "nvshmem_bootstrap_mpi.so.3")
    host = lib / "libnvshmem_host.so.3"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(host), str(src), "-Wl,-soname,libnvshmem_host.so.3",
                    "-Wl,--enable-new-dtags,-rpath,$ORIGIN"], check=True)
    shutil.rmtree(build.root / "gone")
    report = audit(build.root / "nvidia")
    (f,) = rules(report)["plugin-unresolved-library"]
    assert (f.severity, f.file, f.fields["needed"], f.fields["opener"]) == (
        "warning", str(boot), "libmpi.so.40", str(host))
    assert f.fields["feature"] == "MPI bootstrap: only with NVSHMEM over MPI" and f.fields["feature"] in f.message
    assert "unresolved-library" not in rules(report) and not report.failed
    assert f.fields["silence"] == '[ignore] paths = ["nvshmem/lib/nvshmem_bootstrap_mpi.so.3"]'
    # The policy line it names silences it.
    policy = tmp_path / "policy.toml"
    policy.write_text(f.fields["silence"].replace("] ", "]\n", 1) + "\n")
    from conftest import run_cli

    p = run_cli("audit", "--json", "--policy", str(policy), str(build.root / "nvidia"))
    assert p.returncode == 0 and "plugin-unresolved-library" not in p.stdout, p.stdout + p.stderr
    # The same library needed through DT_NEEDED is no plugin: an error.
    build.lib("nvidia/app/libuser.so", links=[boot], runpath=["$ORIGIN/../nvshmem/lib"])
    assert rules(audit(build.root / "nvidia"))["unresolved-library"][0].severity == "error"


def test_c_runtime_may_come_from_the_host_but_libgomp_may_not(build, tmp_path):
    host = tmp_path / "host"
    for name in ("libstdc++.so.6", "libgomp.so.1", "libgcc_s.so.1"):
        build.lib(f"../host/{name}")
    links = [host / n for n in ("libstdc++.so.6", "libgomp.so.1", "libgcc_s.so.1")]
    build.lib("ext.so", links=links)
    r = rules(audit(build.root, policy=host_policy(host)))
    assert [f.fields["needed"] for f in r["resolved-on-host"]] == ["libgomp.so.1"]
    allowed = host_policy(host, **{"allowed-libraries": ["libgomp.so.*"]})
    assert "resolved-on-host" not in rules(audit(build.root, policy=allowed))


def test_needs_preloaded_library(build):
    """A library nobody in the tree loads, with no runpath, needing a sibling:
    NVIDIA's libcusolverMg. It works only where libcublas is loaded first."""
    cublas = build.lib("lib/libcublas.so.13")
    build.lib("lib/libcusolverMg.so.12", links=[cublas])
    r = rules(audit(build.root))
    (f,) = r["needs-preloaded-library"]
    assert f.severity == "warning" and f.fields["providers"] == [str(build.root / "lib/libcublas.so.13")]
    assert "unresolved-library" not in r


def test_already_loaded_inside_a_chain_satisfies_the_need(build):
    cublas = build.lib("lib/libcublas.so.13")
    mg = build.lib("lib/libcusolverMg.so.12", links=[cublas])
    build.exe("bin/app", links=[cublas, mg], runpath=["$ORIGIN/../lib"])
    r = rules(audit(build.root))
    assert "needs-preloaded-library" not in r and "unresolved-library" not in r


def test_an_executable_gets_no_benefit_of_the_doubt(build):
    a = build.lib("lib/libA.so")
    b = build.lib("lib/libB.so", links=[a])
    build.exe("bin/app", links=[b], runpath=["$ORIGIN/../lib/../lib"])
    os.rename(build.root / "lib/libA.so", build.root / "elsewhere.so")
    os.makedirs(build.root / "other")
    os.rename(build.root / "elsewhere.so", build.root / "other/libA.so")
    (f,) = rules(audit(build.root))["unresolved-library"]
    assert f.fields["candidates"] == [str(build.root / "other/libA.so")]
    assert "exists at" in f.message


def test_runpath_rules_in_tree_mode(build):
    build.lib("stubs/libcuda.so", soname="libcuda.so.1")
    build.lib("lib/libx.so", runpath=["", "$ORIGIN/../stubs", "$ORIGIN/missing",
                                     "/data/tmp/openmpi_install/lib", "relative/dir"])
    r = rules(audit(build.root))
    assert [f.fields["entry"] for f in r["runpath-empty-entry"]] == [""]
    assert [f.fields["entry"] for f in r["stub-in-runpath"]] == ["$ORIGIN/../stubs"]
    assert r["stub-in-runpath"][0].severity == "error"
    # libx.so needs nothing it lacks: the missing directory costs nothing.
    assert [(f.fields["entry"], f.severity) for f in r["runpath-stale-dir"]] == [("$ORIGIN/missing", "info")]
    impure = {f.fields["entry"]: f.severity for f in r["runpath-impure"]}
    assert impure == {"/data/tmp/openmpi_install/lib": "warning", "relative/dir": "warning"}


def test_ambiguous_library(build):
    a1 = build.lib("d1/libA.so", code="int v = 1;\n")
    build.lib("d2/libA.so", code="int v = 2;\n")
    build.lib("ext.so", links=[a1], runpath=["$ORIGIN/d1", "$ORIGIN/d2"])
    (f,) = rules(audit(build.root))["ambiguous-library"]
    assert f.fields["winner"] == str(build.root / "d1/libA.so")
    assert f.fields["others"] == [str(build.root / "d2/libA.so")]


def test_invalid_files(build):
    build.lib("ok/libok.so")
    (build.root / "bad").mkdir()
    (build.root / "bad/truncated.so").write_bytes(build.root.joinpath("ok/libok.so").read_bytes()[:200])
    os.symlink("loop2", build.root / "bad/loop1")
    os.symlink("loop1", build.root / "bad/loop2")
    os.symlink("gone.so.1", build.root / "bad/libgone.so")
    os.mkfifo(build.root / "bad/fifo")  # must never be opened: that would hang
    weird = os.fsencode(str(build.root / "bad")) + b"/lib\xff\xfe.so"
    shutil.copy(build.root / "ok/libok.so", weird)
    r = rules(audit(build.root))
    reasons = {os.path.basename(f.file): f.fields["reason"] for f in r["invalid-elf"]}
    assert "past the end" in reasons["truncated.so"]
    assert reasons["loop1"] == reasons["loop2"] == "symlink loop"
    assert reasons["libgone.so"] == "dangling symlink to gone.so.1"
    assert os.fsdecode(b"lib\xff\xfe.so") not in reasons  # a valid ELF file, whatever its name
    assert all(f.severity == "warning" for f in r["invalid-elf"])


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _installed_for_nobody(top: str) -> dict | None:
    """A Python the unprivileged user can run, with the installed package and the
    distributions it needs linked (or copied) into `top`: the test environment
    may sit where only root can enter (a checkout in root's home)."""
    from importlib.metadata import PackageNotFoundError, distribution

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    site, seen, todo = os.path.join(top, "site"), set(), ["nixcuda-tools"]
    while todo:
        try:
            dist = distribution(todo.pop())
        except PackageNotFoundError:  # a dependency for another platform or Python
            continue
        if dist.metadata["Name"].lower() in seen:
            continue
        seen.add(dist.metadata["Name"].lower())
        todo += [re.split(r"[<>=!~ ;\[(]", r)[0] for r in dist.requires or () if "extra ==" not in r]
        for f in dist.files or ():
            if f.parts[0] != "..":  # scripts outside site-packages are not needed
                dest = os.path.join(site, f)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                try:
                    os.link(dist.locate_file(f), dest)
                except OSError:
                    shutil.copy(dist.locate_file(f), dest)
    env = dict(os.environ, PYTHONPATH=site)
    for py in (getattr(sys, "_base_executable", sys.executable), sys.executable, "/usr/bin/python3"):
        probe = subprocess.run([*NOBODY, py, "-c", "import closure_audit.cli"], capture_output=True, env=env, cwd=top)
        if probe.returncode == 0:
            return {"python": py, "env": env}
    return None


def test_unreadable_file():
    """Run as an unprivileged user, for whom a mode-000 file is really unreadable."""
    top = tempfile.mkdtemp(prefix="closure-audit-perm-")
    try:
        os.chmod(top, 0o755)
        nobody = _installed_for_nobody(top)
        require("root, setpriv and a Python the unprivileged user can run", nobody is not None)
        tree = os.path.join(top, "tree")
        os.mkdir(tree)
        secret = os.path.join(tree, "secret.so")
        with open(secret, "wb") as f:
            f.write(b"\x7fELF")
        os.chmod(secret, 0)
        shutil.copy("/bin/true", os.path.join(tree, "true"))  # something the audit can read
        p = subprocess.run([*NOBODY, nobody["python"], "-m", "closure_audit", "audit", "--json", tree],
                           capture_output=True, text=True, timeout=60, env=nobody["env"], cwd=top)
        report = json.loads(p.stdout)
        validate(report)
        (f,) = report["findings"]
        assert (f["rule"], f["file"], f["reason"]) == ("invalid-elf", secret, "unreadable: permission denied")
        assert p.returncode == 0  # a warning does not fail the audit
    finally:
        shutil.rmtree(top)


def test_nix_mode_rules(build, monkeypatch):
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    dep = build.lib("store/aaaa-dep/lib/libdep.so")
    stub = build.lib("store/cccc-cuda-stubs/lib/stubs/libcuda.so", soname="libcuda.so.1")
    build.lib("store/bbbb-torch/lib/libtorch.so", links=[dep, stub],
              runpath=[str(store / "aaaa-dep/lib"), "/build/source/lib", "$ORIGIN/../gone",
                       str(store / "cccc-cuda-stubs/lib/stubs")])
    r = audit(store / "bbbb-torch")
    assert r.mode == "nix-store"
    by = rules(r)
    assert {f.fields["entry"]: f.severity for f in by["runpath-impure"]} == {"/build/source/lib": "error"}
    assert [f.fields["entry"] for f in by["runpath-missing-dir"]] == ["$ORIGIN/../gone"]
    assert [f.fields["needed"] for f in by["missing-driver-runpath"]] == ["libcuda.so.1"]
    assert by["stub-in-runpath"][0].fields["entry"] == str(store / "cccc-cuda-stubs/lib/stubs")
    # A library's process already runs on its glibc: libc is not reported.
    assert "unresolved-library" not in by


def test_nix_mode_driver_runpath_satisfies(build, monkeypatch):
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    stub = build.lib("elsewhere/libcuda.so.1", soname="libcuda.so.1")
    build.lib("store/bbbb-torch/lib/libtorch.so", links=[stub], runpath=["/run/opengl-driver/lib"])
    by = rules(audit(store / "bbbb-torch"))
    assert not by, {k: [f.message for f in v] for k, v in by.items()}
    # And a configured driver directory replaces the default.
    p = parse_policy({"driver": {"directories": ["/usr/lib/wsl/lib"]}})
    by = rules(audit(store / "bbbb-torch", policy=p))
    assert set(by) == {"missing-driver-runpath", "runpath-impure"}


def test_nix_profile_links_into_other_store_paths_are_followed(build, monkeypatch):
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    build.lib("store/aaaa-torch/lib/libtorch.so", runpath=["/usr/lib"])
    (store / "pppp-profile/lib").mkdir(parents=True)
    os.symlink(store / "aaaa-torch/lib/libtorch.so", store / "pppp-profile/lib/libtorch.so")
    r = audit(store / "pppp-profile")
    assert r.elf_files == 1 and [f.rule for f in r.findings] == ["runpath-impure"]


def test_policy_severity_and_ignore(build):
    build.lib("lib/libx.so", runpath=["$ORIGIN/missing"])
    build.lib("tests/liby.so", runpath=["$ORIGIN/missing"])
    p = parse_policy({"severity": {"runpath-stale-dir": "error"}, "ignore": {"paths": ["tests/*"]}})
    r = audit(build.root, policy=p)
    assert [(f.rule, f.severity, os.path.basename(f.file)) for f in r.findings] == [
        ("runpath-stale-dir", "error", "libx.so")]
    assert r.failed
    off = parse_policy({"severity": {"runpath-stale-dir": "off"}})
    assert audit(build.root, policy=off).findings == []


def test_target_errors(build, tmp_path, monkeypatch):
    with pytest.raises(TargetError, match="target not found"):
        audit(tmp_path / "nope")
    monkeypatch.setenv("NIX_STORE_DIR", str(build.root / "store"))
    (build.root / "store/x").mkdir(parents=True)
    with pytest.raises(TargetError, match="mix"):
        audit(build.root / "store/x", tmp_path)


def test_lone_file_uses_its_environment_as_the_tree(venv):
    (venv.root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    r = audit(venv.root / "site-packages/torch/lib/libtorch_cuda.so")
    assert r.env.tree_roots == (str(venv.root),) and not r.failed


@pytest.mark.parametrize("site", ["usr/local/lib/python3.12/site-packages", "usr/lib/python3/dist-packages"])
def test_lone_file_in_a_python_prefix_uses_its_site_packages_as_the_tree(build, site):
    """pip into a prefix without a venv (most container images): the other
    wheels of that site-packages are the tree, not the host."""
    cudart = build.lib(f"{site}/nvidia/cu13/lib/libcudart.so.13")
    torch = build.lib(f"{site}/torch/lib/libtorch_cuda.so", links=[cudart], runpath=["$ORIGIN/../../nvidia/cu13/lib"])
    r = audit(torch)
    assert r.env.tree_roots == (str(build.root / site),)
    # Info aside (a host CUDA in ld.so.conf makes libcudart's RUNPATH hit shadowable), nothing.
    assert not r.failed and [f for f in r.findings if f.severity != "info"] == [], [f.message for f in r.findings]


def test_lone_file_in_a_pip_target_directory_uses_it_as_the_tree(build):
    """pip install --target DIR: dist-info folders beside the packages, under
    any name, make DIR the tree, as site-packages is; a dist-info a package
    vendors deeper down does not."""
    cudart = build.lib("deps/nvidia/cu13/lib/libcudart.so.13")
    torch = build.lib("deps/torch/lib/libtorch_cuda.so", links=[cudart], runpath=["$ORIGIN/../../nvidia/cu13/lib"])
    for dist in ("deps/torch-2.14.1.dist-info", "deps/nvidia_cuda_runtime-13.0.96.dist-info",
                 "deps/torch/_vendor/packaging-24.2.dist-info"):
        (build.root / dist).mkdir(parents=True)
    r = audit(torch)
    assert r.env.tree_roots == (str(build.root / "deps"),)
    # Info aside (a host CUDA in ld.so.conf makes libcudart's RUNPATH hit shadowable), nothing.
    assert not r.failed and [f for f in r.findings if f.severity != "info"] == [], [f.message for f in r.findings]


def test_lone_file_without_a_tree_asks_for_root(build, tmp_path):
    """Outside any venv, conda env or Python prefix the tree cannot be told:
    the command says how to name it instead of guessing the file's directory."""
    from conftest import run_cli

    dep = build.lib("deps/libdep.so.1")
    lib = build.lib("app/libapp.so", links=[dep], runpath=["$ORIGIN/../deps"])
    p = run_cli("audit", str(lib))
    assert p.returncode == 2 and "pass --root DIR" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    p = run_cli("audit", "--root", str(build.root), str(lib))
    assert p.returncode == 0, p.stdout + p.stderr


def test_targets_that_hold_nothing_to_audit_say_so(build, tmp_path):
    """A non-ELF file, a truncated library, a saved closure, an empty tree:
    each says what it is (exit 2) instead of passing."""
    from conftest import run_cli

    good = build.lib("libgood.so")
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    truncated = tmp_path / "libcut.so"
    truncated.write_bytes(good.read_bytes()[:300])
    dump = tmp_path / "closure.json"
    dump.write_text(json.dumps({"/nix/store/" + "a" * 32 + "-x": {"narSize": 1, "references": []}}))
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(truncated, broken / "libcut.so")
    cases = [
        (script, f"no ELF files in {script}"),
        (truncated, f"{truncated} is not a valid ELF file: "),
        (dump, f"{dump}: this is a path-info dump: use --path-info {dump}"),
        (empty, f"no ELF files in {empty}"),
        (broken, f"no valid ELF file in {broken}: 1 invalid, such as {broken}/libcut.so: "),
    ]
    for target, message in cases:
        p = run_cli("audit", str(target))
        assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert run_cli("audit", str(build.root)).returncode == 0


def test_driver_libraries_stay_allowed_from_the_host(build, tmp_path):
    """libcuda and NVML are the machine's driver: found on the host (or not at
    all), they are fine in a tree; every entry of the driver table is."""
    from closure_audit.loader.libraries import DRIVER_LIBRARIES

    host = tmp_path / "host"
    host.mkdir()
    names = ["libcuda.so.1", "libnvidia-ml.so.1", "libnvcuvid.so.1", "libcudadebugger.so.1", "libnvoptix.so.1",
             "libEGL_nvidia.so.0", "libGLX_nvidia.so.0", "libGLESv2_nvidia.so.2"]
    import fnmatch
    assert all(any(fnmatch.fnmatchcase(n, p) for p in DRIVER_LIBRARIES) for n in names)
    deps = [build.lib(f"drv/{n}", soname=n) for n in names]
    for n in names[:2]:
        shutil.copy(build.root / "drv" / n, host / n)
    build.lib("t/libuser.so", links=deps)
    shutil.rmtree(build.root / "drv")
    r = audit(build.root / "t", policy=host_policy(host))
    assert not r.findings, [f.message for f in r.findings]


def test_interpreter_outside_the_store(build, monkeypatch):
    """A program in the store whose PT_INTERP is the host's loader."""
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    glibc = build.lib("store/" + "g" * 32 + "-glibc/lib/libc-fixture.so")
    exe = build.exe("store/" + "a" * 32 + "-app/bin/app", runpath=[str(glibc.parent)])
    host_interp = read_interp(exe)
    assert not host_interp.startswith(str(store))
    r = rules(audit(store / ("a" * 32 + "-app")))
    (f,) = r["interpreter-outside-store"]
    assert f.severity == "error" and f.fields["interpreter"] == host_interp and f.file == str(exe)
    # Pointed at an interpreter in the store: no finding.
    fake = store / ("l" * 32 + "-glibc-interp/lib/ld-linux-x86-64.so.2")
    fake.parent.mkdir(parents=True)
    shutil.copy(host_interp, fake)
    build.patch(exe, "--set-interpreter", str(fake))
    assert "interpreter-outside-store" not in rules(audit(store / ("a" * 32 + "-app")))
    # Tree mode does not check it: a tree runs on the host's loader.
    monkeypatch.setenv("NIX_STORE_DIR", "/nix/store")
    assert "interpreter-outside-store" not in rules(audit(build.root / "store"))


def read_interp(path) -> str:
    from closure_audit.elf.reader import read_elf

    return read_elf(str(path)).interp
