"""Output a CI job and a terminal can trust: names shown literally and
safely, no escape sequence where no terminal is, a closed pipe ends quietly,
summaries written once, progress where a person watches. Closures here are
saved dumps over a store directory made for the test, so no Nix is needed."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from terminal import pty_run

HASH = {"root": "a" * 32, "magma": "b" * 32, "root2": "c" * 32}


@pytest.fixture
def hostile(build):
    """Libraries whose names hold rich markup and an escape sequence; each
    needs a library that is missing, so each is named in a finding."""
    dep = build.lib("libdep.so")
    for name in (b"[bold red]x[/].so", b"\x1b[31mevil.so", b":smile:.so"):
        lib = build.lib("tmp.so", links=[dep])
        path = os.fsencode(str(build.root)) + b"/" + name  # "[bold red]x[" is a directory
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.rename(lib, path)
    dep.unlink()
    return build.root


def test_names_are_shown_literally_and_escaped(hostile):
    p = run_cli("audit", str(hostile))
    assert p.returncode == 1
    assert "[bold red]x[/].so" in p.stdout and ":smile:.so" in p.stdout
    assert "\\x1b[31mevil.so" in p.stdout and "\x1b" not in p.stdout


def test_no_color_on_a_terminal_means_no_escape_at_all(hostile):
    styled = pty_run(["audit", str(hostile)], {"TERM": "xterm-256color"})
    assert b"\x1b[" in styled  # a terminal gets colours ...
    assert b"\\x1b[31mevil.so" in styled and b"\x1b[31mevil" not in styled  # ... never a name's own
    plain = pty_run(["audit", str(hostile)], {"TERM": "xterm-256color", "NO_COLOR": "1"})
    assert b"\x1b" not in plain and b"[bold red]x[/].so" in plain


def test_logs_are_not_wrapped(build):
    deep = "d" * 60 + "/" + "e" * 60
    dep = build.lib(f"{deep}/libdep.so")
    build.lib(f"{deep}/libtop_with_a_long_name.so", links=[dep])
    dep.unlink()
    p = run_cli("audit", str(build.root), env={"COLUMNS": ""})
    line = next(ln for ln in p.stdout.splitlines() if "libtop_with_a_long_name.so" in ln)
    assert f"{deep}/libtop_with_a_long_name.so" in line and "libdep.so is not found" in line


def _closed_pipe(args: list[str], **env) -> subprocess.CompletedProcess:
    """Run with standard output a pipe nobody reads: closed before the first write."""
    e = dict(os.environ, **env)
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return subprocess.CompletedProcess(args, proc.wait(timeout=120), "", err)


@pytest.mark.parametrize("json_out", [False, True])
def test_a_closed_pipe_ends_quietly(hostile, json_out):
    p = _closed_pipe(["closure_audit", "audit", *(["--json"] if json_out else []), str(hostile)])
    assert p.stderr == "" and p.returncode != 0


def test_a_closed_pipe_ends_quietly_for_redist_features(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/libx.so.1").write_bytes(b"x")
    p = _closed_pipe(["redist_features", str(tmp_path)])
    assert p.stderr == "" and p.returncode != 0


# -- closures from dumps over a store made here -----------------------------------

@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store directory: root references magma (the bytes hold its hash),
    root2 references nothing; dumps of both closures."""
    store = tmp_path / "store"
    paths = {k: store / f"{h}-{k if k != 'magma' else 'magma-2.9.0'}" for k, h in HASH.items()}
    for p in paths.values():
        p.mkdir(parents=True)
    (paths["root"] / "lib").mkdir()
    for i in range(3):
        (paths["root"] / "lib" / f"f{i}.txt").write_text(f"{paths['magma']}/lib\n")
    (paths["magma"] / "libmagma.so").write_bytes(b"magma")
    (paths["root2"] / "x").write_text("nothing\n")
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    new = {str(paths["root"]): {"narSize": 3000, "references": [str(paths["magma"])]},
           str(paths["magma"]): {"narSize": 5000, "references": []}}
    old = {str(paths["root2"]): {"narSize": 1000, "references": []}}
    (tmp_path / "new.json").write_text(json.dumps(new))
    (tmp_path / "old.json").write_text(json.dumps(old))
    return tmp_path


def test_gate_summary_named_twice_is_written_once(store):
    budgets = store / "budgets.toml"
    budgets.write_text('[targets.t]\npath-info = "new.json"\n')
    summary = store / "summary.md"
    summary.write_text("earlier step\n")
    p = run_cli("gate", "--budgets", str(budgets), "--markdown", str(summary),
                env={"GITHUB_STEP_SUMMARY": str(summary), "NIX_STORE_DIR": os.environ["NIX_STORE_DIR"]})
    text = summary.read_text()
    assert p.returncode == 1 and text.startswith("earlier step\n## closure-audit gate")
    assert text.count("## closure-audit gate") == 1


@pytest.mark.parametrize("command", [["gate", "--budgets", "budgets.toml"], ["diff", "old.json", "new.json"]])
def test_markdown_and_json_cannot_share_stdout(store, command):
    (store / "budgets.toml").write_text('[targets.t]\npath-info = "new.json"\n')
    p = run_cli(*command, "--markdown", "-", "--json", cwd=store,
                env={"NIX_STORE_DIR": os.environ["NIX_STORE_DIR"]})
    assert p.returncode == 2 and p.stdout == "" and "--markdown - and --json" in p.stderr


def test_diff_markdown_in_the_gates_style(store):
    md = store / "diff.md"
    p = run_cli("diff", str(store / "old.json"), str(store / "new.json"), "--markdown", str(md),
                env={"NIX_STORE_DIR": os.environ["NIX_STORE_DIR"], "GITHUB_STEP_SUMMARY": ""})
    text = md.read_text()
    assert p.returncode == 1 and text.startswith("## closure-audit diff: ❌ failed")
    assert "| package | status | version | size | delta |" in text
    assert "| `magma` | added | ∅ → 2.9.0 |" in text and "| `forbidden-path` | error |" in text
    assert "<details><summary><code>magma-2.9.0</code> is in" in text
    p = run_cli("diff", str(store / "old.json"), str(store / "new.json"), "--markdown", "-",
                env={"NIX_STORE_DIR": os.environ["NIX_STORE_DIR"], "GITHUB_STEP_SUMMARY": ""})
    assert p.stdout == text


@pytest.fixture
def shown(monkeypatch):
    """Replace the progress display with a recorder of the counts it is given."""
    from closure_audit.output import progress as module

    calls: list[int] = []

    @contextlib.contextmanager
    def recording(unit="file"):
        yield calls.append

    monkeypatch.setattr(module, "progress", recording)
    return calls


@pytest.mark.parametrize("command", [
    ["why", "--path-info", "new.json"],
    ["gate", "--budgets", "budgets.toml"],
    ["diff", "old.json", "new.json"],
])
def test_closure_commands_show_progress(store, shown, command, monkeypatch, capsys):
    from closure_audit.cli import main

    (store / "budgets.toml").write_text('[targets.t]\npath-info = "new.json"\n')
    monkeypatch.chdir(store)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert main(command) == 1
    assert shown and shown[-1] >= 3  # the three files of root were scanned for magma's hash


def test_archs_deep_shows_progress(build, shown, capsys):
    from closure_audit.cli import main

    for i in range(3):
        build.lib(f"libx{i}.so")
    main(["archs", "--deep", str(build.root)])
    assert 3 in shown


def test_one_file_is_one_file(build):
    build.lib("libone.so")
    p = run_cli("audit", str(build.root))
    assert "1 file, 1 ELF, 1 entry point" in p.stdout and "1 files" not in p.stdout


def test_every_command_has_one_way_out():
    """Each command's run() returns output.show(result, ...): the result of
    its ops/ module, whose `command` names a view of output.VIEWS whose
    functions exist and take the whole result (nothing in commands/ or
    output/ is called with a splat)."""
    import ast
    import importlib
    import re
    from pathlib import Path

    from closure_audit import output
    from closure_audit.cli import COMMANDS
    from closure_audit.output import html, json_report, markdown

    top = Path(output.__file__).parent.parent
    assert set(output.VIEWS) == set(COMMANDS)
    for name in COMMANDS:
        ops = importlib.import_module(f"closure_audit.ops.{name.replace('-', '_')}")
        assert ops.Result.command == name and isinstance(ops.Result.failed, property)
        view = output.VIEWS[name]
        assert view.json is None or callable(getattr(json_report, view.json))
        assert view.markdown is None or callable(getattr(markdown, view.markdown))
        assert view.page is None or callable(getattr(html, view.page))
        module, function = view.terminal.split(":")
        assert callable(getattr(importlib.import_module(f"closure_audit.output.terminal.{module}"), function))
        run = next(n for n in ast.parse((top / f"commands/{name.replace('-', '_')}.py").read_text()).body
                   if isinstance(n, ast.FunctionDef) and n.name == "run")
        returns = [n for n in ast.walk(run) if isinstance(n, ast.Return)]
        assert len(returns) == 1 and ast.unparse(returns[0].value).startswith("output.show(result"), name
    for path in [*(top / "commands").glob("*.py"), *(top / "output").rglob("*.py")]:
        splats = [n.lineno for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
                  and any(isinstance(a, ast.Starred) for a in n.args)
                  and re.search(r"render|_json$|_markdown$|_page$", ast.unparse(n.func))]
        assert not splats, (path, splats)


def test_no_line_ends_with_a_space(build):
    """Findings tables whose rows and titles differ in width, and the table
    of opened names: rich pads the title and the last column to the table's
    width, and none of that padding reaches a log or a terminal."""
    dep = build.lib("lib/libdep.so")
    build.lib("lib/libshort.so", links=[dep])
    build.lib("lib/" + "libwith_a_much_longer_name" * 3 + ".so", links=[dep], runpath=["/nonexistent/dir"])
    build.lib("lib/libopener.so", code='#include <dlfcn.h>\nvoid *f(void) { return dlopen("libzz.so.1", 2); }\n'
              'void *g(void) { return dlopen("libcuda.so.1", 2); }\n')
    dep.unlink()
    logged = run_cli("audit", "--opened", str(build.root)).stdout
    assert "opened at run time" in logged and "unresolved-library" in logged and "libzz.so.1" in logged
    shown = pty_run(["audit", "--opened", str(build.root)], {"TERM": "xterm-256color", "NO_COLOR": "1",
                                                             "COLUMNS": "100"}).decode()
    assert "opened at run time" in shown
    for out in (logged, shown.replace("\r\n", "\n")):
        padded = [line for line in out.splitlines() if line.endswith(" ")]
        assert not padded, padded
