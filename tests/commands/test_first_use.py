"""The command line as a new user meets it: a closed pipe, mistyped commands,
targets of the wrong kind, tables that keep every character, the first screen
of an audit, and --help that describes every argument."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import zipfile

import pytest

import synthetic
from conftest import run_cli, validate
from nixstore import have_nix, needs_nix
from terminal import pty_run

CLI = f"{shlex.quote(sys.executable)} -m closure_audit"


@pytest.fixture
def many_names(build):
    """A library that may open 3,000 plugins and needs one missing library:
    output longer than a pipe holds, and one error."""
    names = ",".join(f'"libplugin_number_{i:05d}.so"' for i in range(3000))
    lib = build.lib("lib/libbig.so", code=f"const char *names[] = {{{names}}};\n")
    build.patch(lib, "--add-needed", "libmissing.so.3")
    return build.root


def _piped_to_head(command: str) -> subprocess.CompletedProcess:
    """`COMMAND | head -n 1` in bash with pipefail: the status is the command's."""
    return subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | head -n 1"], capture_output=True,
                          text=True, timeout=120)


def test_a_reader_that_goes_away_ends_the_command_by_sigpipe(many_names, tmp_path):
    dump = tmp_path / "dump.json"
    synthetic.write(str(dump), 3000)
    for command in (f"{CLI} audit --json {many_names}", f"{CLI} audit --opened {many_names}",
                    f"{CLI} size --all {dump}", f"{CLI} size --all --json {dump}"):
        p = _piped_to_head(command)
        assert p.returncode == 128 + signal.SIGPIPE, (command, p.returncode, p.stderr)
        assert p.stderr == "" and p.stdout.count("\n") == 1, command


# -- what a target may be ---------------------------------------------------------

def test_a_nix_file_is_not_read_as_a_saved_closure(tmp_path):
    (tmp_path / "default.nix").write_text("{ }: { }\n")
    p = run_cli("size", "./default.nix", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "./default.nix is a Nix file, not a closure" in p.stderr and "not JSON" not in p.stderr
    assert "a store path, a result link, an installable (.#attr)" in p.stderr
    assert "nix-build ./default.nix" in p.stderr


@pytest.mark.parametrize("text, message", [
    ("", "is empty"),
    ("  \n", "is empty"),
    (json.dumps({"schema": "closure-audit/2", "findings": []}), "is a closure-audit/2 report, not a"),
])
def test_inputs_of_the_wrong_shape_get_a_plain_message(tmp_path, text, message):
    given = tmp_path / "given.json"
    given.write_text(text)
    for args in (["size", str(given)], ["why", "--path-info", str(given)]):
        p = run_cli(*args)
        assert p.returncode == 2 and message in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def test_an_audit_report_given_back_as_a_dump(build, tmp_path):
    build.lib("lib/libA.so")
    report = tmp_path / "report.json"
    report.write_text(run_cli("audit", "--json", str(build.root)).stdout)
    p = run_cli("diff", str(report), str(report))
    schema = json.loads(report.read_text())["schema"]
    assert p.returncode == 2 and f"{report} is a {schema} report" in p.stderr


def test_a_directory_given_to_tree(build):
    build.lib("lib/libA.so")
    p = run_cli("audit", str(build.root), "--tree", "lib")
    assert p.returncode == 2
    assert p.stderr.strip() == "closure-audit: error: --tree takes one ELF file of the tree, not a directory: lib"


@needs_nix
def test_build_is_suggested_only_where_building_helps(tmp_path):
    """Only an installable Nix evaluates to an output not in the store is
    helped by --build; a missing flake, attribute or file is not."""
    flake = tmp_path / "flake"
    flake.mkdir()
    (flake / "flake.nix").write_text(
        '{ outputs = _: { unbuilt = builtins.derivation { name = "never-built-' + str(os.getpid()) + '"; '
        'system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; }; }; }\n')
    env = {"NIX_CONFIG": "substituters ="}
    p = run_cli("size", ".#unbuilt", cwd=flake, env=env)
    assert p.returncode == 2 and p.stderr.rstrip().endswith("is not valid (not built? pass --build)"), p.stderr
    for target, cwd in ((".#missing", flake), ("./missing.json", tmp_path), (f"{tmp_path}/none#x", tmp_path)):
        p = run_cli("size", target, cwd=cwd, env=env)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert "--build" not in p.stderr, (target, p.stderr)


# -- the command line -------------------------------------------------------------

@pytest.mark.parametrize("word, message", [
    ("audti", "unknown command 'audti' (did you mean audit?)"),
    ("szie", "unknown command 'szie' (did you mean size?)"),
    ("docter", "unknown command 'docter' (did you mean doctor?)"),
    ("frobnicate", "unknown command 'frobnicate' (commands: audit, why, size, diff, gate, archs, report, "
                   "doctor, why-build, trace, survey; or an existing path to audit)"),
])
def test_a_mistyped_command_is_named(tmp_path, word, message):
    p = run_cli(word, "x", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == f"closure-audit: error: {message}"


def test_an_existing_path_is_still_audited_without_a_command(build, tmp_path):
    build.lib("audti/libA.so")
    p = run_cli("audti", cwd=build.root)
    assert p.returncode == 0 and "audit · tree mode" in p.stdout, p.stderr
    for target in (".#torch", "./audti-not-here", "/nix/store/" + "a" * 32 + "-x"):  # targets, not commands
        p = run_cli(target, cwd=tmp_path, env={"NIX_CONFIG": "substituters ="})
        assert p.returncode == 2 and "unknown command" not in p.stderr, p.stderr


def test_options_may_come_before_the_target_and_the_command(build, tmp_path):
    build.lib("lib/libA.so")
    p = run_cli("--json", str(build.root))
    assert p.returncode == 0, p.stderr
    validate(json.loads(p.stdout))
    dump = tmp_path / "dump.json"
    synthetic.write(str(dump), 10)
    p = run_cli("--json", "size", str(dump))
    assert p.returncode == 0 and json.loads(p.stdout)["command"] == "size", p.stderr


def _undescribed(help_text: str) -> list[str]:
    """Arguments in an argparse --help without a description."""
    out = []
    body = help_text.split("\n\n", 1)[1]
    for section in re.split(r"\n(?=\S[^\n]*:\n)", body):
        title, _, entries = section.partition(":\n")
        if title.strip() not in ("positional arguments", "options", "optional arguments"):
            continue
        lines = entries.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"^  (\S.*?)(?:\s{2,}(\S.*))?$", line)
            if not m or line.startswith("   "):
                continue
            follows = i + 1 < len(lines) and lines[i + 1].startswith(" " * 6)
            if not m.group(2) and not follows:
                out.append(m.group(1))
    return out


def test_every_argument_is_described_in_help():
    from closure_audit.cli import COMMANDS

    helps = {f"closure-audit {c}": run_cli(c, "--help") for c in COMMANDS}
    for args in ([], ["manifest"]):
        helps[" ".join(["redist-features", *args])] = subprocess.run(
            [sys.executable, "-m", "redist_features", *args, "--help"], capture_output=True, text=True)
    for name, p in helps.items():
        assert p.returncode == 0, (name, p.stderr)
        assert _undescribed(p.stdout) == [], name


# -- --store URLs -------------------------------------------------------------------

STORE_PATH = "/nix/store/" + "a" * 32 + "-app-1.0"


def test_a_store_path_without_a_scheme(tmp_path):
    p = run_cli("size", STORE_PATH, "--store", "cache", cwd=tmp_path)
    assert p.returncode == 2
    assert f"did you mean file://{tmp_path}/cache?" in p.stderr and len(p.stderr.splitlines()) == 1


def test_a_missing_cache_directory(tmp_path):
    p = run_cli("size", STORE_PATH, "--store", f"file://{tmp_path}/nothing")
    assert p.returncode == 2 and f"no such directory: {tmp_path}/nothing" in p.stderr


def test_the_gate_refuses_a_dump_with_store(tmp_path):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[targets.t]\nmax-closure-size = "1 GiB"\n')
    synthetic.write(str(tmp_path / "dump.json"), 10)
    p = run_cli("gate", "--budgets", str(budgets), "--store", f"file://{tmp_path}", "--path-info",
                f"t={tmp_path}/dump.json")
    assert p.returncode == 2
    assert p.stderr.strip() == "closure-audit: error: --store reads closures from the binary cache: give no --path-info"


def test_a_name_that_does_not_resolve_is_asked_once(monkeypatch):
    from closure_audit.cache.transport import FetchError, Transport

    asked = []

    def resolver(errno: int, message: str):
        def getaddrinfo(host, *args, **kwargs):
            asked.append(host)
            raise socket.gaierror(errno, message)
        return getaddrinfo

    monkeypatch.setattr(socket, "getaddrinfo", resolver(socket.EAI_NONAME, "Name or service not known"))
    with pytest.raises(FetchError, match="cannot resolve the host"):
        Transport("http://cache.invalid", attempts=5, backoff=0.001).get("nix-cache-info")
    assert asked == ["cache.invalid"]
    # A resolver that fails for a moment is asked again.
    asked.clear()
    monkeypatch.setattr(socket, "getaddrinfo", resolver(socket.EAI_AGAIN, "Temporary failure in name resolution"))
    with pytest.raises(FetchError, match="after 3 attempts"):
        Transport("http://cache.invalid", attempts=3, backoff=0.001).get("nix-cache-info")
    assert asked == ["cache.invalid"] * 3


# -- tables ------------------------------------------------------------------------

LONG = ("python3.12-a-package-whose-name-is-long-enough-to-fold", "libcublas")


def _dumps(tmp_path) -> tuple[str, str]:
    """Two closures whose packages have long names and versions."""
    def dump(file, seed, versions):
        root = f"/nix/store/{synthetic.fake_hash('root', seed)}-app-1.0"
        deps = [f"/nix/store/{synthetic.fake_hash(n, seed)}-{n}-{v}" for n, v in zip(LONG, versions)]
        data = {root: {"narSize": 1000, "references": deps}}
        data.update({d: {"narSize": 5000 * (i + 1) * seed, "references": []} for i, d in enumerate(deps)})
        (tmp_path / file).write_text(json.dumps(data))
        return str(tmp_path / file)

    return (dump("old.json", 1, ("1.2.3.4.5.6.7.8", "13.0.2.14-static")),
            dump("new.json", 2, ("1.2.3.4.5.6.7.9-with-a-long-suffix", "13.1.0.3-static")))


def _column(text: str, header: str) -> str:
    """The cells of one column of a table, each folded cell joined again:
    columns are told apart by the gutters blank on every line."""
    lines = text.splitlines()
    top = next(i for i, ln in enumerate(lines) if re.search(rf"(^|  ){re.escape(header)}( |$)", ln))
    rows = []
    for ln in lines[top:]:
        if not ln.strip():
            break
        rows.append(ln)
    width = max(map(len, rows))
    rows = [ln.ljust(width) for ln in rows]
    start = rows[0].index(header)
    end = next((i for i in range(start, width) if all(ln[i] == " " for ln in rows)), width)
    return "".join(ln[start:end].strip() for ln in rows[1:])


def test_off_a_terminal_tables_are_never_cut_nor_wrapped(tmp_path):
    old, new = _dumps(tmp_path)
    p = run_cli("diff", old, new, env={"COLUMNS": "80"})
    assert p.returncode == 1, p.stderr  # the -static output is forbidden
    lines = p.stdout.splitlines()
    assert any(ln.startswith(LONG[0]) and "1.2.3.4.5.6.7.8 → 1.2.3.4.5.6.7.9-with-a-long-suffix" in ln
               for ln in lines), p.stdout
    assert any(ln.startswith("/nix/store/") and "-libcublas-13.1.0.3-static  libcublas-13.1.0.3-static is in "
               "the closure (a static-library output), adding 19.5 KiB; reached in 1 hop" in ln for ln in lines)
    assert "…" not in p.stdout


def test_on_a_narrow_terminal_names_fold_but_lose_nothing(tmp_path):
    old, new = _dumps(tmp_path)
    out = pty_run(["diff", old, new], {"COLUMNS": "60", "NO_COLOR": "1"}).decode().replace("\r", "")
    assert max(map(len, out.splitlines())) <= 60
    packages = _column(out, "package")
    versions = _column(out, "version")
    assert LONG[0] in packages and "1.2.3.4.5.6.7.8→1.2.3.4.5.6.7.9-with-a-long-suffix" in versions.replace(" ", "")
    assert "13.0.2.14→13.1.0.3" in versions.replace(" ", "")
    assert "…" not in out


# -- the first screen of an audit --------------------------------------------------

def test_an_audit_shows_its_errors_first_and_summarises_what_may_be_opened(many_names):
    p = run_cli("audit", str(many_names))
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    first_error = next(i for i, ln in enumerate(lines) if "unresolved-library" in ln)
    assert first_error < 5, p.stdout[:2000]
    assert "libplugin_number_02999.so" not in p.stdout  # findings show 40 rows of each rule
    summary = next(ln for ln in lines if ln.startswith("opened at run time"))
    assert "3,000 names (3,000 unknown): 3,000 not found" in summary and "--opened" in summary
    full = run_cli("audit", "--opened", str(many_names)).stdout
    assert all(f"libplugin_number_{i:05d}.so" in full for i in range(3000))
    assert full.index("unresolved-library") < full.index("libplugin_number_00000.so")
    report = json.loads(run_cli("audit", "--json", str(many_names)).stdout)
    assert len({r["name"] for r in report["opened"]}) == 3000


# -- progress ----------------------------------------------------------------------

def test_the_wheel_progress_ends_at_the_summary_count(build, tmp_path):
    from closure_audit.elf.walk import walk_targets
    from closure_audit.targets import resolve_target, scope_of

    lib = build.lib("libA.so")
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/lib/libA.so", lib.read_bytes())
        for i in range(700):
            z.writestr(f"pkg/data/{i}.txt", b"x")
    shown = []
    walked = walk_targets(scope_of([resolve_target(str(wheel))]), progress=shown.append)
    assert shown[-1] == walked.scan.files == 701
    assert shown == sorted(shown)
