"""closure-audit as a user runs it: exit codes, one-line errors, the JSON contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli, validate

pytestmark = pytest.mark.fhs


@pytest.fixture
def broken(build):
    """Errors and warnings of several rules in one tree."""
    a = build.lib("lib/libA.so")
    build.lib("stubs/libcuda.so.1", soname="libcuda.so.1")
    build.exe("bin/app", links=[a, build.root / "stubs/libcuda.so.1"],
              runpath=["$ORIGIN/../lib", "$ORIGIN/../stubs", "", "/data/tmp/openmpi_install/lib"])
    build.patch(build.root / "bin/app", "--add-needed", "libmissing.so.2")
    (build.root / "lib/libjunk.so").write_bytes(b"\x7fELF\x02\x01\x01" + b"\xff" * 60)
    return build


def test_shorthand_and_clean_exit(build):
    build.lib("lib/libA.so")
    p = run_cli(str(build.root))
    assert p.returncode == 0, p.stderr
    assert "tree mode" in p.stdout and "OK: no finding of severity error" in p.stdout
    assert "\x1b[" not in p.stdout  # no colour codes when not on a terminal


def test_findings_exit_one_and_are_grouped_by_rule(broken):
    p = run_cli("audit", str(broken.root))
    assert p.returncode == 1
    out = p.stdout
    for rule in ("unresolved-library", "stub-in-runpath", "runpath-empty-entry", "runpath-impure", "invalid-elf"):
        assert rule in out
    assert out.index("unresolved-library") < out.index("runpath-empty-entry")  # errors first
    assert "FAIL:" in out and p.stderr == ""


def test_json_contract(broken):
    p = run_cli("audit", "--json", str(broken.root))
    assert p.returncode == 1
    report = json.loads(p.stdout)
    validate(report)
    assert report["schema"] == "closure-audit/3" and report["mode"] == "tree"
    assert report["target"] == [os.path.realpath(broken.root)]
    s = report["summary"]
    assert s["elf_files"] == 3 and s["findings"]["error"] == sum(
        1 for f in report["findings"] if f["severity"] == "error")
    assert sum(s["rules"].values()) == len(report["findings"])
    (miss,) = [f for f in report["findings"] if f["rule"] == "unresolved-library"]
    assert miss["needed"] == "libmissing.so.2" and miss["file"].endswith("bin/app")


def test_tree_view(broken):
    p = run_cli("audit", str(broken.root), "--tree", str(broken.root / "bin/app"))
    out = p.stdout
    assert "libA.so → bin/../lib/libA.so  [runpath $ORIGIN/../lib]" in out
    assert "libmissing.so.2  [not found]" in out
    assert "libcuda.so.1 → bin/../stubs/libcuda.so.1  [runpath $ORIGIN/../stubs]" in out
    assert "libc.so.6  [already loaded]" in out
    assert "libc.so.6 → " in out and "[host]" in out
    p = run_cli("audit", "--json", str(broken.root), "--tree", "bin/app")
    tree = json.loads(p.stdout)["tree"]
    validate(json.loads(p.stdout))
    hows = {d["needed"]: d["how"] for d in tree["dependencies"]}
    assert hows["libA.so"] == "runpath" and hows["libmissing.so.2"] == "not-found"


@pytest.mark.parametrize("args, message", [
    (["audit", "/nonexistent/target"], "target not found: /nonexistent/target"),
    ([], "a command or a target is required (try --help)"),
    (["audit"], "the following arguments are required: TARGET"),
    (["audit", "--bogus", "."], "unrecognized arguments: --bogus"),
])
def test_usage_errors_are_one_line(args, message):
    p = run_cli(*args)
    assert p.returncode == 2
    assert p.stderr.strip() == f"closure-audit: error: {message}"
    assert p.stdout == ""


GONE = "/nix/store/" + "1" * 32 + "-gone"


@pytest.mark.parametrize("target, message", [
    ("nope-1.0", "target not found: nope-1.0"),
    ("./missing/lib.so", "target not found: ./missing/lib.so"),
    (GONE, f"path '{GONE}' is not in the store"),
])
def test_every_command_names_a_missing_target_one_way(tmp_path, target, message):
    """One resolver reads every command's targets: each reason a target
    cannot be read is one message, whichever command was given it."""
    commands = [["audit"], ["size"], ["why", target], ["archs"], ["doctor", "--host-root", str(tmp_path)]]
    if target != GONE:  # why-build reads derivations: a store path goes to the store's own records
        commands.append(["why-build"])
    for command in commands:
        p = run_cli(*command, target, cwd=tmp_path)
        assert (p.returncode, p.stderr.strip()) == (2, f"closure-audit: error: {message}"), command


def test_policy_errors(build, tmp_path):
    build.lib("libA.so")
    cases = {
        "missing": (None, "policy file not found"),
        "bad.toml": ("[severity\n", "is not valid TOML"),
        "key.toml": ("[driver]\ndirectory = ['/x']\n", "unknown key 'driver.directory'"),
        "rule.toml": ("[severity]\nno-such-rule = 'error'\n", "unknown rule 'no-such-rule'"),
        "level.toml": ("[severity]\ninvalid-elf = 'fatal'\n", "must be one of error, warning, info, off"),
        "type.toml": ("[ignore]\npaths = 'x'\n", "'ignore.paths' must be a list of strings"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        p = run_cli("audit", "--policy", str(path), str(build.root))
        assert p.returncode == 2, name
        assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_policy_can_fail_on_warnings(build, tmp_path):
    build.lib("lib/libx.so", runpath=["$ORIGIN/missing"])
    assert run_cli("audit", str(build.root)).returncode == 0
    pol = tmp_path / "p.toml"
    pol.write_text('schema = "closure-audit-policy/1"\n[severity]\nrunpath-stale-dir = "error"\n')
    assert run_cli("audit", "--policy", str(pol), str(build.root)).returncode == 1


def test_result_symlink_into_a_store(build, tmp_path):
    store = build.root / "store"
    build.lib("store/aaaa-pkg/lib/libA.so", runpath=["/usr/lib"])
    os.symlink(store / "aaaa-pkg", tmp_path / "result")
    p = run_cli("audit", "--json", str(tmp_path / "result"), env={"NIX_STORE_DIR": str(store)})
    report = json.loads(p.stdout)
    assert report["mode"] == "nix-store" and report["target"] == [str(store / "aaaa-pkg")]
    assert [f["rule"] for f in report["findings"]] == ["runpath-impure"] and p.returncode == 1


def test_non_utf8_names_are_audited_and_shown_escaped(build):
    """A valid library whose name is not UTF-8 is read by its contents (here:
    a need that is missing), and shown with \\xNN escapes in JSON and text."""
    dep = build.lib("libdep.so")
    lib = build.lib("libA.so", links=[dep])
    os.rename(lib, os.fsencode(str(build.root)) + b"/lib\xff.so")
    dep.unlink()
    p = run_cli("audit", "--json", str(build.root))
    report = json.loads(p.stdout)
    validate(report)
    (f,) = report["findings"]
    assert f["file"].endswith("lib\\xff.so") and f["rule"] == "unresolved-library" and p.returncode == 1
    text = run_cli("audit", str(build.root))
    assert "lib\\xff.so" in text.stdout and "invalid-elf" not in text.stdout


def test_progress_appears_only_on_a_terminal(monkeypatch):
    from closure_audit.output.progress import _LazyProgress

    class Console:
        def __init__(self, tty):
            self.is_terminal = tty

    quiet = _LazyProgress(Console(False), "file")
    quiet.DELAY = 0
    quiet(1000)
    assert quiet.progress is None
    shown = _LazyProgress(Console(True), "file")
    shown.DELAY = 0
    from rich.console import Console as Real
    import io

    shown.console = Real(file=io.StringIO(), force_terminal=True)
    shown(1000)
    assert shown.progress is not None
    shown.stop()
    early = _LazyProgress(Console(True), "file")  # a scan shorter than the delay shows nothing
    early(10)
    assert early.progress is None


@pytest.mark.parametrize("version, message", [
    ("nix (Nix) 2.3.16", "Nix 2.3.16 is too old: closure-audit needs Nix 2.4 or newer"),
    ("something else", "Nix (unknown version) is too old"),
])
def test_an_old_nix_is_refused_in_one_line(tmp_path, version, message):
    fake = tmp_path / "nix"
    fake.write_text(f"#!/bin/sh\necho '{version}'\n")
    fake.chmod(0o755)
    p = run_cli("size", ".#python3Packages.torch", env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def test_a_tree_audit_loads_only_what_it_needs(build):
    """Start-up is most of a tree audit's time (benchmarks/bench_audit.py):
    the closure layer (numpy, igraph, orjson) and the wheel reader (zipfile
    and its codecs) load only for the targets that need them."""
    build.lib("libx.so")
    code = ("import sys; from closure_audit.cli import main; main(['audit', '--json', sys.argv[1]]); "
            "print(' '.join(m for m in ('numpy', 'igraph', 'orjson', 'zipfile', 'closure_audit.elf.wheel') "
            "if m in sys.modules), "
            "file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code, str(build.root)], capture_output=True, text=True)
    assert p.stderr.strip() == ""
