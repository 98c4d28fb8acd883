"""`closure-audit report` and `gate --html` on real store closures built by
Nix, read back in headless Chromium."""

from __future__ import annotations

import json
import os

import pytest

from browser import By, needs_browser
from conftest import run_cli
from nixstore import needs_nix, nix_build, path_info
from closure_audit.nix.storepath import name_part
from closure_audit.util import format_size
from closures import FIXTURE

pytestmark = [needs_nix, needs_browser]

PAGE = """
return {
  rects: Array.from(document.querySelectorAll('.treemap [data-path]'),
                    e => [e.dataset.path, +e.dataset.addedSize]),
  forbidden: Array.from(document.querySelectorAll('[data-forbidden]'),
                        e => [e.getAttribute('data-forbidden'), e.innerText]),
  verdicts: Array.from(document.querySelectorAll('.verdict'), e => e.innerText),
  pictures: Array.from(document.querySelectorAll('section.picture h2'), e => e.innerText),
};
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    return {name: nix_build(tmp, FIXTURE, attr=name)[0] for name in ("torch", "cudatoolkit", "magma", "d")}


def _why(target: str) -> dict:
    p = run_cli("why", target, "--json")
    assert p.returncode == 1, p.stderr
    return {f["file"]: f for f in json.loads(p.stdout)["findings"]}


def test_report_of_a_store_path(store, tmp_path, browser):
    out = tmp_path / "report.html"
    p = run_cli("report", store["torch"], "-o", str(out))
    assert p.returncode == 1, p.stderr  # forbidden paths are errors, as in `why`
    assert p.stdout.startswith(f"closure-audit report: wrote {out}") and p.stderr == ""
    browser.open(out)
    page = browser.js(PAGE)
    info = path_info(store["torch"])
    assert {path for path, _ in page["rects"]} == set(info)  # every path of the closure, once
    assert len(page["rects"]) == len(info)

    # the forbidden paths as `why` finds them: every hop named, with its evidence
    why = _why(store["torch"])
    assert {path for path, _ in page["forbidden"]} == set(why) == {store["cudatoolkit"], store["magma"]}
    for path, text in page["forbidden"]:
        for hop in why[path]["chain"]:
            assert hop in text and name_part(hop) in text
        for hop in why[path]["hops"]:
            best = hop["evidence"][0]
            assert f"{best['kind']} in {best['file']} @{best['offset']:#x}" in text
    [(_, cuda)] = [f for f in page["forbidden"] if f[0] == store["cudatoolkit"]]
    assert "runpath-used in lib/libtorch_cuda.so" in cuda and "runpath entry " + store["cudatoolkit"] + "/lib" in cuda
    [(_, magma)] = [f for f in page["forbidden"] if f[0] == store["magma"]]
    assert "text in share/cmake/TorchConfig.cmake" in magma

    # details: Nix's own sizes
    browser.driver.find_element(By.CSS_SELECTOR, f'[data-forbidden="{store["cudatoolkit"]}"] button.goto').click()
    details = browser.driver.find_element(By.ID, "details").text
    entry = path_info(store["cudatoolkit"], closure_size=True)[store["cudatoolkit"]]
    assert store["cudatoolkit"] in details
    assert f"NAR size\n{format_size(entry['narSize'])}" in details
    assert f"closure size\n{format_size(entry['closureSize'])}" in details
    assert "referrers (1)\ntorch-2.9.0" in details
    assert browser.requests() == [browser.url] and browser.console() == []


def test_report_of_a_result_link_and_of_a_dump(store, tmp_path, browser):
    link = tmp_path / "result"
    link.symlink_to(store["torch"])
    dump = tmp_path / "closure.json"
    dump.write_text(json.dumps(path_info(store["torch"])))
    for target in (str(link), str(dump)):
        out = tmp_path / f"{os.path.basename(target)}.html"
        p = run_cli("report", target, "-o", str(out))
        assert p.returncode == 1, p.stderr
        browser.open(out)
        page = browser.js(PAGE)
        assert {path for path, _ in page["rects"]} == set(path_info(store["torch"]))
        # the store is local: the evidence is there for a dump too
        assert all("@0x" in text for _, text in page["forbidden"]) and len(page["forbidden"]) == 2
    out = tmp_path / "pick.html"
    p = run_cli("report", "--path-info", str(dump), os.path.basename(store["magma"]), "-o", str(out))
    assert p.returncode == 1, p.stderr
    browser.open(out)
    page = browser.js(PAGE)
    assert page["rects"] == [[store["magma"], json.loads(dump.read_text())[store["magma"]]["narSize"]]]
    assert page["pictures"] == ["magma-2.7.2"]


def test_report_input_errors_are_one_line_and_leave_files_alone(store, tmp_path):
    kept = tmp_path / "kept.html"
    kept.write_text("an earlier report")
    missing = f"{os.path.dirname(store['torch'])}/{'0' * 32}-missing-1.0"
    for args, message in [
        ((missing, "-o", str(kept)), f"path '{missing}' is not in the store"),
        (("nope-1.0", "-o", str(kept)), "target not found: nope-1.0"),
        ((str(tmp_path / "nope"), "-o", str(kept)), f"target not found: {tmp_path / 'nope'}"),
        ((store["torch"], "-o", str(tmp_path / "no-dir" / "r.html")), "cannot write the report to"),
        ((store["torch"], "-o", str(tmp_path)), "it is a directory"),
        ((store["torch"], "-o", str(kept / "r.html")), "cannot write the report to"),
        ((store["torch"],), "the following arguments are required: -o/--output"),
        ((store["torch"], "-o", str(kept), "--budget", "x"), "--budget needs --budgets FILE"),
    ]:
        p = run_cli("report", *args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert p.stdout == ""
    assert kept.read_text() == "an earlier report"
    assert sorted(os.listdir(tmp_path)) == ["kept.html"]


def test_gate_html_and_report_budgets_show_the_verdict(store, tmp_path, browser):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(f"""
[targets.torch]
path = "{store['torch']}"
max-closure-size = "10 KiB"
[targets.data]
path = "{store['d']}"
max-closure-size = "1 GiB"
""")
    out, md = tmp_path / "gate.html", tmp_path / "gate.md"
    p = run_cli("gate", "--budgets", str(budgets), "--html", str(out), "--markdown", str(md))
    assert p.returncode == 1, p.stderr
    assert md.read_text().startswith("## closure-audit gate: ❌ failed")
    browser.open(out)
    page = browser.js(PAGE)
    assert page["pictures"] == ["torch", "data"]
    assert page["verdicts"][0].startswith("gate: failed") and "over its budget of 10.0 KiB" in page["verdicts"][0]
    assert page["verdicts"][1] == "gate: passed"
    assert {path for path, _ in page["rects"]} == set(path_info(store["torch"])) | set(path_info(store["d"]))
    assert browser.console() == [] and browser.requests() == [browser.url]

    p = run_cli("gate", "--budgets", str(budgets), "--html", str(tmp_path / "none" / "g.html"))
    assert p.returncode == 2 and "cannot write the report to" in p.stderr

    out = tmp_path / "report.html"
    p = run_cli("report", store["d"], "--budgets", str(budgets), "--budget", "data", "-o", str(out))
    assert p.returncode == 0, p.stderr
    browser.open(out)
    assert browser.js(PAGE)["verdicts"] == ["gate: passed"]
    p = run_cli("report", store["torch"], "--budgets", str(budgets), "-o", str(out))
    assert p.returncode == 2 and "pick one with --budget NAME" in p.stderr
    p = run_cli("report", store["torch"], "--budgets", str(budgets), "--budget", "torch", "-o", str(out))
    assert p.returncode == 1
    browser.open(out)
    [verdict] = browser.js(PAGE)["verdicts"]
    assert verdict.startswith("gate: failed") and "magma-2.7.2 is in the closure" in verdict


def test_report_budgets_take_a_baseline_and_say_the_verdict(store, tmp_path):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[targets.torch]\nmax-growth = "0 B"\nallow = ["*"]\n')
    out = tmp_path / "report.html"
    p = run_cli("report", store["torch"], "--budgets", str(budgets), "-o", str(out))
    assert p.returncode == 2 and "needs a baseline" in p.stderr and "--baseline" in p.stderr
    # The option the message names exists: the same closure as baseline passes, a smaller one fails.
    p = run_cli("report", store["torch"], "--budgets", str(budgets), "--baseline", store["torch"], "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("0 forbidden; budget torch: passed"), p.stdout
    p = run_cli("report", store["torch"], "--budgets", str(budgets), "--baseline", store["d"], "-o", str(out))
    assert p.returncode == 1, p.stderr
    assert p.stdout.strip().endswith("budget torch: failed (1 error)"), p.stdout
    p = run_cli("report", store["torch"], "--baseline", store["d"], "-o", str(out))
    assert p.returncode == 2 and "--baseline needs --budgets FILE" in p.stderr
