"""The package as users install it: the wheel ci/setup built from this checkout
and installed in the test environment. Its file list is the checkout's (every
module under tools/, every file the tools read), every module imports from
where it was installed, and the console scripts run from a directory outside
the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from importlib.metadata import distribution
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import fakehost
import redist_fixture
from conftest import ROOT, package_files, validate
from parts import CI

DIST = distribution("nixcuda-tools")
PACKAGES = ("closure_audit", "redist_features", "nixcuda_data")


def _installed_wheel() -> Path:
    """The wheel the installed package came from (pip records it in direct_url.json)."""
    origin = json.loads(DIST.read_text("direct_url.json") or "{}")
    if "archive_info" not in origin:
        message = "the package is not installed from a wheel (ci/setup builds and installs one)"
        if CI:
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    return Path(unquote(urlparse(origin["url"]).path))


def _script(name: str) -> str:
    """A console script as installed, found through the distribution's own record."""
    (entry,) = [f for f in DIST.files if f.name == name and f.parent.name == "bin"]
    return str(DIST.locate_file(entry))


def _run(cwd: Path, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run with nothing of the checkout on the path: a user's shell in another directory."""
    assert not cwd.resolve().is_relative_to(ROOT)
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env={**e, **(env or {})}, timeout=120)


def test_the_wheel_holds_every_file_of_the_checkout():
    with zipfile.ZipFile(_installed_wheel()) as whl:
        held = {n for n in whl.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert held == set(package_files())
    assert {"closure_audit/host/__init__.py", "closure_audit/output/report.js",
            "nixcuda_data/cuda-capabilities.json"} <= held


def test_every_module_imports_from_the_installed_package(tmp_path):
    with zipfile.ZipFile(_installed_wheel()) as whl:
        modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__") for n in whl.namelist()
                         if n.endswith(".py") and not n.endswith("__main__.py"))  # __main__ runs the tool
    code = ("import importlib, json, sys; "
            "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))")
    p = _run(tmp_path, sys.executable, "-c", code, *modules)
    assert p.returncode == 0, p.stderr
    files = json.loads(p.stdout)
    site = Path(DIST.locate_file("")).resolve()
    assert sorted(files) == modules and "closure_audit.host" in modules
    assert all(Path(f).resolve().is_relative_to(site) for f in files.values()), files
    # The data files the tools read, through the code that reads them.
    p = _run(tmp_path, sys.executable, "-c", "from closure_audit.cuda.code import capability_table as t; "
             "from closure_audit.output.html import _asset as a; print(len(t()), len(a('report.js')))")
    assert p.returncode == 0 and all(int(n) > 0 for n in p.stdout.split()), p.stderr


def test_every_command_answers_help(tmp_path):
    from closure_audit.cli import COMMANDS

    closure_audit, redist_features = _script("closure-audit"), _script("redist-features")
    for argv in ([closure_audit, "--help"], *([closure_audit, c, "--help"] for c in COMMANDS),
                 [redist_features, "--help"], [sys.executable, "-m", "closure_audit", "--help"],
                 [sys.executable, "-m", "redist_features", "--help"]):
        p = _run(tmp_path, *argv)
        assert p.returncode == 0 and p.stdout.startswith("usage:") and p.stderr == "", (argv, p.stderr)


def test_doctor_gives_a_verdict_on_a_fake_host(tmp_path):
    host = fakehost.nixos(tmp_path / "root", driver="550.54.14", kernel="550.40.07")
    p = _run(tmp_path, _script("closure-audit"), "doctor", "--root", str(host.root), "--json",
             env={"PATH": "/fakebin:/usr/bin:/bin"})
    assert p.returncode == 1, p.stderr  # the driver library and the kernel module disagree
    data = json.loads(p.stdout)
    validate(data)
    assert [f["rule"] for f in data["findings"] if f["severity"] == "error"] == ["driver-kernel-mismatch"]


def test_redist_features_runs_on_a_redist_archive(tmp_path, objects):
    archive = redist_fixture.pack(redist_fixture.make_tree(tmp_path / "src", objects), tmp_path)
    p = _run(tmp_path, _script("redist-features"), str(archive), "--json")
    assert p.returncode == 0, p.stderr
    (pkg,) = json.loads(p.stdout)["packages"]
    assert (pkg["package"], pkg["version"]) == ("libdemo", "13.0.1") and "lib" in pkg["outputs"]
