"""`closure-audit survey` over a small real package set built with Nix: a few
derivations with references, one that drags a forbidden path, one with GPU
code from nvcc, one left unbuilt, one that fails to evaluate. Its jobs are
written in nix-eval-jobs' format from the evaluation itself, the built paths
pushed to a `file://` binary cache, and every figure of the survey is
compared with `nix path-info --json --recursive --closure-size` on the same
paths, from the local store and through --store (file:// and http://).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cacheserver import CacheServer
from conftest import validate
from cudagen import Nvcc, find_nvcc, gencode
from nixstore import NIX_FLAGS, PRELUDE, needs_nix, nix_build, path_info
from parts import require

pytestmark = needs_nix

BUILT = ["base", "liba", "app", "cudatoolkit", "leaky", "gpu", "multi"]

SET = r"""
rec {
  base = sh "survey-base-1.0" ''mkdir -p $out; head -c 20000 /dev/zero > $out/data'';
  cudatoolkit = sh "cudatoolkit-12.0" ''mkdir -p $out; echo toolkit > $out/t'';
  liba = sh "survey-liba-1.0" ''mkdir -p $out; echo ${base} > $out/ref; head -c @BLOB@ /dev/zero > $out/blob'';
  app = sh "survey-app-1.0" ''mkdir -p $out/bin; echo ${liba} @APP_EXTRA@ > $out/bin/app'';
  leaky = sh "survey-leaky-1.0" ''mkdir -p $out; echo ${cudatoolkit} ${liba} > $out/refs'';
  gpu = sh "survey-gpu-1.0" ''mkdir -p $out/lib; cp ${builtins.path { path = @GPULIB@; name = "libk.so"; }} $out/lib/libk.so'';
  multi = shOutputs "survey-multi-1.0" [ "out" "dev" ] ''mkdir -p $out $dev; echo ${base} > $out/r; echo $out > $dev/r'';
  unbuilt = sh "survey-unbuilt-1.0" ''mkdir -p $out; echo ${base} > $out/x'';
  broken = throw "survey: this job does not evaluate";
}
"""

# nix-eval-jobs' lines, from the same evaluation: each job's name, system,
# drvPath and outputs, or its error.
EVAL = r"""
let
  set = import ./set.nix;
  job = n:
    let r = builtins.tryEval (builtins.seq set.${n}.drvPath set.${n}); v = r.value; in
    if !r.success then { attr = n; attrPath = [ n ]; error = "error: evaluating ${n} failed"; }
    else {
      attr = n; attrPath = [ n ]; inherit (v) name system drvPath;
      outputs = builtins.listToAttrs (map (o: { name = o; value = v.${o}.outPath; }) (v.outputs or [ "out" ]));
    };
in map job (builtins.attrNames set)
"""


def _build_set(tmp: Path, gpulib: Path, blob: int, app_extra: str) -> tuple[dict, list[dict]]:
    body = SET.replace("@BLOB@", str(blob)).replace("@APP_EXTRA@", app_extra).replace("@GPULIB@", str(gpulib))
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "set.nix").write_text(PRELUDE + body)
    (tmp / "eval.nix").write_text(EVAL)
    p = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "--read-write-mode", str(tmp / "eval.nix")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    jobs = json.loads(p.stdout)
    built = {}
    outputs = {j["attr"]: sorted(j["outputs"].values()) for j in jobs if "outputs" in j}
    for name in BUILT:
        nix_build(tmp, body, attr=name)  # every output of the derivation
        built[name] = outputs[name]
    for j in jobs:
        if "outputs" in j:
            j["cacheStatus"] = "local" if j["attr"] in built else "notBuilt"
    return built, jobs


def _write_lines(path: Path, jobs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    return path


def _copy(cache: Path, built: dict) -> None:
    paths = [p for outs in built.values() for p in outs]
    subprocess.run(["nix", *NIX_FLAGS, "copy", "--to", f"file://{cache}?compression=xz", *paths], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    nvcc = find_nvcc()
    require("nvcc (ci/setup installs NVIDIA's compiler wheels)", nvcc is not None)
    tmp = tmp_path_factory.mktemp("survey")
    gpulib = Nvcc(nvcc, tmp).build("libk.so", gencode("86:sm_86", "90:[sm_90,compute_90]"))
    one_built, one_jobs = _build_set(tmp / "one", gpulib, 20000, "")
    # The second evaluation: liba's closure grew (and with it app's and leaky's),
    # app now drags the toolkit in, and gpu lost sm_86.
    (tmp / "gpu2").mkdir()
    gpulib2 = Nvcc(nvcc, tmp / "gpu2").build("libk.so", gencode("90:[sm_90,compute_90]"))
    two_built, two_jobs = _build_set(tmp / "two", gpulib2, 400000, "${cudatoolkit}")
    cache = tmp / "cache"
    _copy(cache, one_built)
    _copy(cache, two_built)
    return {"one": (one_built, _write_lines(tmp / "one.jsonl", one_jobs), one_jobs),
            "two": (two_built, _write_lines(tmp / "two.jsonl", two_jobs), two_jobs), "cache": cache, "tmp": tmp}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def survey(*args, env=None):
    """The survey's JSON report (checked against the schema) and its exit status."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "closure_audit", "survey", *args, "--json"], capture_output=True,
                       text=True, env=e, timeout=300)
    assert p.returncode in (0, 1, 2), p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    report = json.loads(p.stdout)
    validate(report)
    return p.returncode, report


def _jobs(report) -> dict:
    return {j["attr"]: j for j in report["jobs"]}


def _expected(outputs: list[str]) -> tuple[int, int, dict]:
    info = path_info(*outputs, closure_size=True)
    return sum(v["narSize"] for v in info.values()), len(info), info


@pytest.mark.parametrize("where", ["local", "file", "http"])
def test_figures_match_nix_path_info(sets, where):
    built, lines, jobs = sets["one"]
    args = [str(lines), "--archs"]
    if where == "file":
        args += ["--store", f"file://{sets['cache']}"]
    server = CacheServer(str(sets["cache"])) if where == "http" else None
    if server is not None:
        server.__enter__()
        args += ["--store", server.url]
    try:
        code, report = survey(*args)
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    got = _jobs(report)
    assert code == 1  # leaky drags the toolkit in
    for name in BUILT:
        job = got[name]
        assert job["status"] == "judged", job
        size, count, info = _expected(built[name])
        assert (job["closure_size"], job["paths"]) == (size, count), name
        if len(built[name]) == 1:  # one output: Nix's own closure size of it
            assert job["closure_size"] == info[built[name][0]]["closureSize"]
        assert sorted(job["outputs"].values()) == sorted(built[name])
    assert got["multi"]["outputs"].keys() == {"out", "dev"}
    # Forbidden: the chain from the job's output, as `why` gives it.
    (forbidden,) = got["leaky"]["forbidden"]
    assert forbidden["chain"] == [built["leaky"][0], built["cudatoolkit"][0]]
    assert forbidden["pattern"] == "cudatoolkit-*" and not got["leaky"]["passed"]
    assert got["cudatoolkit"]["forbidden"][0]["chain"] == [built["cudatoolkit"][0]]
    assert all(not got[n]["forbidden"] and got[n]["passed"] for n in ("base", "liba", "app", "gpu", "multi"))
    # GPU code of the job's own files: nvcc's sm_86, sm_90 and compute_90.
    assert set(got["gpu"]["gpu_code"]) == {"sm_86", "sm_90", "compute_90"}
    assert all(n > 0 for n in got["gpu"]["gpu_code"].values())
    assert got["base"]["gpu_code"] == {}
    # Not judged, with the reason, never passing.
    assert got["unbuilt"]["status"] == "unknown" and not got["unbuilt"]["passed"]
    assert ("not built" in got["unbuilt"]["reason"]) if where == "local" else \
        ("no narinfo" in got["unbuilt"]["reason"])
    assert got["unbuilt"]["reason"].endswith("(nix-eval-jobs: notBuilt)")
    assert got["broken"]["status"] == "unknown" and "failed to evaluate" in got["broken"]["reason"]
    assert report["summary"]["judged"] == len(BUILT) and report["summary"]["unknown"] == 2
    # Regressions and failures first.
    assert report["jobs"][0]["attr"] in ("leaky", "cudatoolkit")


def test_exit_two_when_a_job_is_not_judged_and_nothing_fails(sets, tmp_path):
    built, _, jobs = sets["one"]
    keep = [j for j in jobs if j["attr"] in ("base", "liba", "unbuilt")]
    code, report = survey(str(_write_lines(tmp_path / "e.jsonl", keep)))
    assert code == 2 and report["summary"]["unknown"] == 1
    code, report = survey(str(_write_lines(tmp_path / "f.jsonl", keep[:2])))
    assert code == 0 and all(j["passed"] for j in report["jobs"])


def test_nix_eval_json_of_store_paths(sets, tmp_path):
    built, _, _ = sets["one"]
    doc = {"base": built["base"][0], "nested": {"liba": built["liba"][0]}}
    (tmp_path / "e.json").write_text(json.dumps(doc))
    code, report = survey(str(tmp_path / "e.json"), "--store", f"file://{sets['cache']}")
    got = _jobs(report)
    assert code == 0 and set(got) == {"base", "nested.liba"}
    assert got["nested.liba"]["closure_size"] == _expected(built["liba"])[0]


def test_standard_input(sets):
    _, lines, _ = sets["one"]
    e = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "closure_audit", "survey", "-", "--json", "--no-cache"],
                       input=lines.read_text(), capture_output=True, text=True, env=e)
    assert p.returncode == 1 and len(json.loads(p.stdout)["jobs"]) == 9


def test_baseline_growth_new_forbidden_and_lost_code(sets, tmp_path):
    _, one, _ = sets["one"]
    built2, two, jobs2 = sets["two"]
    store = ["--store", f"file://{sets['cache']}"]
    _, before = survey(str(one), "--archs", *store)
    (tmp_path / "before.json").write_text(json.dumps(before))
    # One job gone, one new: drop base from the second evaluation, add a renamed one.
    jobs2 = [j for j in jobs2 if j["attr"] != "base"]
    jobs2.append({**next(j for j in sets["two"][2] if j["attr"] == "base"), "attr": "base2"})
    code, report = survey(str(_write_lines(tmp_path / "two.jsonl", jobs2)), "--archs", *store,
                          "--baseline", str(tmp_path / "before.json"), "--max-growth", "5%",
                          "--max-growth", "100KiB")
    got = _jobs(report)
    assert code == 1
    kinds = {a: {r["kind"] for r in j["regressions"]} for a, j in got.items()}
    assert kinds["liba"] == {"growth"} and got["liba"]["baseline_size"] == _jobs(before)["liba"]["closure_size"]
    assert got["liba"]["closure_size"] - got["liba"]["baseline_size"] == 380000
    assert kinds["app"] == {"growth", "new-forbidden"}
    assert kinds["gpu"] == {"gpu-code-lost"} and got["gpu"]["regressions"][0]["codes"] == ["sm_86"]
    assert kinds["base"] == {"gone"} and got["base"]["status"] == "gone"
    assert got["base2"]["new"] and not kinds["base2"]
    assert kinds["multi"] == set() and kinds["cudatoolkit"] == set()
    # Growth under the limits is no regression: 400 KB allowed.
    _, report = survey(str(two), *store, "--baseline", str(tmp_path / "before.json"), "--max-growth", "400KiB")
    assert {r["kind"] for r in _jobs(report)["liba"]["regressions"]} == set()
    # Regressions first, in every view.
    regressed = [j["attr"] for j in report["jobs"] if j["regressions"]]
    assert [j["attr"] for j in report["jobs"][:len(regressed)]] == regressed
    md = tmp_path / "comment.md"
    p = subprocess.run([sys.executable, "-m", "closure_audit", "survey", str(two), *store, "--baseline",
                        str(tmp_path / "before.json"), "--markdown", str(md), "--html", str(tmp_path / "s.html")],
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    text = md.read_text()
    assert text.index("| job | closure | before |") < text.index("<summary>not judged")
    assert "new forbidden path cudatoolkit-12.0" in text
    page = (tmp_path / "s.html").read_text()
    assert page.index('id="job-app"') < page.index('id="job-base"') and "<script" not in page
    assert p.stdout.index("REGRESSED") < p.stdout.index("pass")


def test_results_kept_by_store_path(sets, tmp_path):
    """A second survey reads nothing it judged before: with the cache served
    over HTTP, it asks for no narinfo at all; after one job changed, only
    that job's closure is read. A damaged results file is harmless."""
    built, lines, jobs = sets["one"]
    with CacheServer(str(sets["cache"])) as server:
        _, first = survey(str(lines), "--store", server.url)
        asked = sum(n for k, n in server.requests.items() if k.endswith(".narinfo"))
        assert asked > 0
        server.requests.clear()
        unbuilt = {os.path.basename(j["outputs"]["out"])[:32] + ".narinfo" for j in jobs if j["attr"] == "unbuilt"}
        # --refresh: nothing from the narinfo cache either; only the job not judged is asked for again.
        _, second = survey(str(lines), "--store", server.url, "--refresh")
        assert {k for k in server.requests if k.endswith(".narinfo")} == unbuilt
        assert [j for j in second["jobs"] if j["status"] == "judged" and not j["kept"]] == []
        for a, b in zip(first["jobs"], second["jobs"]):
            assert {**a, "kept": True} == {**b, "kept": True}
        # One job changed: only its closure is read.
        two_jobs = [j if j["attr"] != "liba" else next(x for x in sets["two"][2] if x["attr"] == "liba")
                    for j in jobs]
        server.requests.clear()
        _, third = survey(str(_write_lines(tmp_path / "c.jsonl", two_jobs)), "--store", server.url, "--refresh")
        fresh = [j["attr"] for j in third["jobs"] if j["status"] == "judged" and not j["kept"]]
        assert fresh == ["liba"]
        liba2 = sets["two"][0]["liba"]
        wanted = {os.path.basename(p)[:32] + ".narinfo" for p in path_info(*liba2)}
        asked = {k for k in server.requests if k.endswith(".narinfo")}
        assert asked - unbuilt == wanted
        # --no-cache reads everything again.
        server.requests.clear()
        _, fourth = survey(str(lines), "--store", server.url, "--refresh", "--no-cache")
        assert not any(j["kept"] for j in fourth["jobs"]) and server.requests
    # A damaged results database: every job judged again, same figures.
    db = tmp_path / "xdg" / "closure-audit" / "survey-v1.sqlite"
    assert db.exists()
    db.write_bytes(b"not a database" * 100)
    _, fifth = survey(str(lines), "--store", f"file://{sets['cache']}")
    assert [(j["attr"], j["closure_size"]) for j in fifth["jobs"]] == [(j["attr"], j["closure_size"])
                                                                       for j in first["jobs"]]


# -- bad input, each named with its job ------------------------------------------------------

def test_bad_lines_and_jobs_are_named_and_the_rest_judged(sets, tmp_path):
    built, lines, jobs = sets["one"]
    good = [j for j in jobs if j["attr"] in ("base", "liba")]
    text = "".join(json.dumps(j) + "\n" for j in good)
    text += '{"attr": "cut", "outputs": {"out": "/nix/st\n'  # cut short
    text += "not json at all\n"
    text += json.dumps({"attr": "noout", "drvPath": good[0]["drvPath"]}) + "\n"
    text += json.dumps({"attr": "empty", "outputs": {}}) + "\n"
    text += json.dumps({"attr": "ca", "outputs": {"out": None}}) + "\n"
    text += json.dumps({"attr": "weird", "outputs": {"out": "not/a/store/path"}}) + "\n"
    text += json.dumps({**good[1], "outputs": {"out": built["base"][0]}}) + "\n"  # liba again, other outputs
    text += "[1, 2]\n"
    (tmp_path / "bad.jsonl").write_text(text)
    code, report = survey(str(tmp_path / "bad.jsonl"))
    got = _jobs(report)
    assert code == 2
    assert got["base"]["status"] == "judged"
    assert "cut short" in got["line 3"]["reason"] and "not JSON" in got["line 4"]["reason"]
    assert got["noout"]["reason"] == "only a drvPath, no outputs" and got["empty"]["reason"] == "no outputs"
    assert "content-addressed" in got["ca"]["reason"] and "not a store path" in got["weird"]["reason"]
    assert "duplicate" in got["liba"]["reason"] and "duplicate" in got["liba (line 9)"]["reason"]
    assert "not a job" in got["line 10"]["reason"]
    assert all(not j["passed"] for a, j in got.items() if a != "base")


@pytest.mark.parametrize("fault", ["404", "500", "garbage", "nothing", "damaged", "nar"])
def test_cache_faults_are_named_with_their_job(sets, fault, tmp_path):
    built, lines, jobs = sets["one"]
    victim = built["base"][0]  # every job but cudatoolkit's reaches it
    key = os.path.basename(victim)[:32] + ".narinfo"
    with CacheServer(str(sets["cache"])) as server:
        args = [str(lines), "--store", server.url, "--no-cache"]
        if fault == "404":
            server.override[key] = 404
        elif fault == "500":
            server.override[key] = 500
        elif fault == "garbage":
            server.override[key] = b"\x00\xff garbage \xfe"
        elif fault == "nothing":
            server.fail_first = (100, "drop")
            server.override = {}
            args += ["--http-connections", "4"]
        elif fault == "damaged":
            text = (sets["cache"] / key).read_text()
            server.override[key] = text.replace("NarSize:", "NarSize: x").encode()
        else:  # a damaged NAR of the GPU job, read with --archs
            info = (sets["cache"] / (os.path.basename(built["gpu"][0])[:32] + ".narinfo")).read_text()
            url = next(ln.split(": ", 1)[1] for ln in info.splitlines() if ln.startswith("URL: "))
            server.override[url] = (sets["cache"] / url).read_bytes()[:-100] + b"x" * 100
            args.append("--archs")
        if fault == "nothing":
            # Every request dropped: the whole cache is unreadable, every job not judged.
            code, report = survey(*args)
            assert code == 2 and report["summary"]["judged"] == 0
            assert all(j["reason"] for j in report["jobs"])
            return
        code, report = survey(*args)
    got = _jobs(report)
    if fault == "nar":
        assert got["gpu"]["status"] == "unknown" and built["gpu"][0] in got["gpu"]["reason"]
        assert got["liba"]["status"] == "judged" and got["base"]["status"] == "judged"
        return
    for name in ("base", "liba", "app", "leaky", "multi"):
        assert got[name]["status"] == "unknown", (name, got[name])
        assert victim in got[name]["reason"], got[name]["reason"]
    assert got["cudatoolkit"]["status"] == "judged"  # nothing else lost
    assert got["cudatoolkit"]["closure_size"] == _expected(built["cudatoolkit"])[0]
    assert code == 1  # cudatoolkit is itself forbidden


def test_usage_errors_fail_closed(tmp_path):
    from conftest import fails_closed

    fails_closed(["survey", str(tmp_path / "missing.jsonl")], "cannot read the evaluation")
    (tmp_path / "empty").write_text("")
    fails_closed(["survey", str(tmp_path / "empty")], "empty")
    (tmp_path / "e.jsonl").write_text('{"attr": "a", "error": "x"}\n')
    (tmp_path / "b.json").write_text('{"schema": "closure-audit/3", "command": "gate"}')
    fails_closed(["survey", str(tmp_path / "e.jsonl"), "--baseline", str(tmp_path / "b.json")],
                 "not the --json report of a survey")
    fails_closed(["survey", str(tmp_path / "e.jsonl"), "--max-growth", "5%"], "--max-growth needs --baseline")


def test_budgets_file_defaults_and_one_job(sets, tmp_path):
    """[defaults] applies to every job, [targets.ATTR] to that job alone: its
    budget and its own forbidden names."""
    built, lines, jobs = sets["one"]
    (tmp_path / "b.toml").write_text('[defaults]\nmax-closure-size = "1 KiB"\n\n[targets.base]\n'
                                     'max-closure-size = "1 GiB"\n\n[targets.liba]\nmax-closure-size = "1 GiB"\n'
                                     'forbidden = ["survey-base-*"]\n')
    keep = [j for j in jobs if j["attr"] in ("base", "liba", "app")]
    code, report = survey(str(_write_lines(tmp_path / "e.jsonl", keep)), "--budgets", str(tmp_path / "b.toml"))
    got = _jobs(report)
    assert code == 1
    assert got["base"]["passed"] and not got["base"]["forbidden"]
    assert [f["path"] for f in got["liba"]["forbidden"]] == built["base"] and not got["liba"]["passed"]
    assert not got["app"]["forbidden"] and not got["app"]["passed"]  # over the defaults' 1 KiB
    rules = {(f["rule"], f["target"]) for f in report["findings"]}
    assert rules == {("forbidden-path", "liba"), ("closure-budget", "app")}


def test_added_size_and_growth_from_a_budgets_file(sets, tmp_path):
    """max-added-size against each job's own dominator tree (what a path adds
    depends on the job's outputs), max-growth instead of --max-growth."""
    built, one, jobs = sets["one"]
    _, before = survey(str(one))
    (tmp_path / "before.json").write_text(json.dumps(before))
    (tmp_path / "b.toml").write_text('[defaults]\nmax-added-size = "30 KiB"\n\n[targets.liba]\nmax-growth = "1 MiB"\n')
    _, two, _ = sets["two"]
    code, report = survey(str(two), "--budgets", str(tmp_path / "b.toml"), "--baseline", str(tmp_path / "before.json"),
                          "--max-growth", "1KiB")
    got = _jobs(report)
    assert code == 1
    info = path_info(*sets["two"][0]["liba"])
    liba = sets["two"][0]["liba"][0]
    # app -> liba (400 KB of blob) -> base: liba adds its own NAR and base's to app, base only itself.
    added = {x["path"]: x["added_size"] for x in got["app"]["largest_added"]}
    assert added[liba] == sum(v["narSize"] for v in info.values())
    assert added[built["base"][0]] == path_info(*built["base"])[built["base"][0]]["narSize"]
    over = {(f["target"], f["file"]) for f in report["findings"] if f["rule"] == "added-size-budget"}
    assert ("app", liba) in over and ("leaky", liba) in over and ("liba", liba) not in over  # a root adds nothing
    # liba's own budget allows 1 MiB of growth; app's growth is judged by --max-growth 1KiB.
    assert {r["kind"] for r in got["liba"]["regressions"]} == set()
    assert "growth" in {r["kind"] for r in got["app"]["regressions"]}
    assert got["base"]["largest_added"] == []  # a closure of its root alone
