"""closureAuditCheck (pkgs/closure-audit/check.nix) built by real Nix for
small real packages: one with references, one that drags a forbidden path,
one with GPU code from nvcc; its nix-support/ files read as Hydra reads them
(tests/support/hydra.py) and every figure compared with what Nix and
closure-audit say of the same paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hydra
from checkbuild import build
from conftest import ROOT, cli_json, validate
from cudagen import Nvcc, find_nvcc, gencode
from nixstore import needs_nix, path_info
from parts import needs

pytestmark = needs_nix
needs_nvcc = needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", find_nvcc() is not None)

PACKAGES = """
let
  dep = clib "libdep-1.0" "libdep.so" "int dep(void) { return 1; }" "";
  # Three outputs: out refers to lib, lib links libdep; dev is build-time only.
  app = shOutputs "app-1.0" [ "out" "lib" "dev" ] ''
    mkdir -p $lib/lib $out/bin $dev/include
    gcc -shared -fPIC -x c -o $lib/lib/libapp.so ${builtins.toFile "app.c" "int dep(void); int app(void) { return dep(); }"} \\
      -L${dep}/lib -ldep -Wl,-rpath,${dep}/lib
    echo "$lib" > $out/bin/app-config
    echo "$out" > $dev/include/app.h
  '';
  # The monolithic toolkit, which the default forbidden list refuses.
  toolkit = sh "cudatoolkit-12.9.1" "mkdir -p $out/bin; echo nvcc > $out/bin/nvcc";
  leaky = sh "leaky-1.0" "mkdir -p $out/share; echo ${toolkit}/bin/nvcc > $out/share/compiler";
  gpu = if GPULIB == null then null else (sh "gpulib-1.0" ''
    mkdir -p $out/lib
    cp ${builtins.path { path = /. + GPULIB; name = "libk.so"; }} $out/lib/libk.so
  '') // { cudaCapabilities = [ "8.6" ]; cudaForwardCompat = false; };
in
{
  inherit app leaky toolkit gpu;
  app-check = closureAuditCheck { package = app; };
  app-kept = closureAuditCheck { package = app; keepReport = true; };
  app-no-outputs = closureAuditCheck { package = app; outputs = [ ]; };
  app-over-budget = closureAuditCheck { package = app; policy.max-closure-size = 1000; };
  app-unknown-key = closureAuditCheck { package = app; policy.max-sise = "1 GiB"; keepReport = true; };
  app-growth = closureAuditCheck { package = app; policy.max-growth = "5%"; };
  leaky-check = closureAuditCheck { package = leaky; };
  leaky-kept = closureAuditCheck { package = leaky; keepReport = true; };
  leaky-allowed = closureAuditCheck { package = leaky; policy.allow = [ "cudatoolkit-*" ]; };
  gpu-check = closureAuditCheck { package = gpu; };
  gpu-missing = closureAuditCheck { package = gpu; capabilities = [ "8.6" "9.0" ]; keepReport = true; };
}
"""


def body(gpulib: Path | None = None) -> str:
    return PACKAGES.replace("GPULIB", "null" if gpulib is None else json.dumps(str(gpulib)))


def built(tmp_path: Path, attr: str, gpulib: Path | None = None) -> str:
    p = build(tmp_path, body(gpulib), attr)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.strip()


def failing(tmp_path: Path, attr: str) -> str:
    p = build(tmp_path, body(), attr)
    assert p.returncode != 0 and p.stdout == "", p.stdout
    return p.stderr


def read_hydra(out: str) -> tuple[dict, dict]:
    """The products (by type and subtype) and metrics of `out`, every line of
    both accepted by Hydra's rules."""
    products, skipped = hydra.products(out)
    assert skipped == [], skipped
    metrics, dropped = hydra.metrics(out)
    assert dropped == [], dropped
    lines = Path(out, "nix-support", "hydra-metrics").read_text().splitlines()
    assert len(lines) == len(metrics), "a metric named twice: Hydra keeps only the last"
    return {(p.type, p.subtype): p for p in products}, metrics


def check_report(out: str) -> dict:
    report = json.loads(Path(out, "report.json").read_text())
    assert report["schema"] == "closure-audit-check/1"
    validate(report["gate"])
    if report["archs"] is not None:
        validate(report["archs"])
    import jsonschema

    schema = json.loads((ROOT / "docs/reference/schema/closure-audit-check-1.schema.json").read_text())
    jsonschema.validate(report, schema)
    return report


def test_check_of_a_package_with_references(tmp_path):
    out = built(tmp_path, "app-check")
    products, metrics = read_hydra(out)
    assert products[("report", "closure-audit")].path == out
    assert products[("report", "closure-audit")].default_path == "report.html"
    assert Path(out, "report.html").read_text().startswith("<!DOCTYPE html>")
    assert products[("file", "json")].path == f"{out}/report.json"
    assert products[("file", "summary")].path == f"{out}/summary.md"
    assert not hydra.failed(out)

    # The runtime outputs (out and lib, not dev) and their closure as Nix has it.
    roots = [built(tmp_path, "app.out"), built(tmp_path, "app.lib")]
    info = path_info(*roots)
    report = check_report(out)
    assert report["outputs"] == roots and report["passed"] is True
    assert not any(p.endswith("-dev") for p in info)
    nar = sum(e["narSize"] for e in info.values())
    assert metrics["closure.bytes"] == hydra.Metric(nar, "B")
    assert metrics["closure.paths"] == hydra.Metric(len(info), "paths")
    assert metrics["closure.forbidden"] == hydra.Metric(0, "paths")
    assert metrics["findings.errors"] == hydra.Metric(0, "findings")
    assert not any(name.startswith("gpu.") for name in metrics)
    for name, m in metrics.items():
        assert report["metrics"][name] == {"value": m.value, "unit": m.unit}
    assert report["gate"]["targets"][0]["paths"] == len(info)
    assert "app-1.0: passed" in Path(out, "summary.md").read_text()


def test_keep_report_on_a_pass_marks_nothing_failed(tmp_path):
    out = built(tmp_path, "app-kept")
    assert not hydra.failed(out) and check_report(out)["passed"] is True


def test_no_output_is_refused_at_evaluation(tmp_path):
    assert "closureAuditCheck app-1.0: no output to check" in failing(tmp_path, "app-no-outputs")


def test_a_forbidden_path_fails_the_build(tmp_path):
    stderr = failing(tmp_path, "leaky-check")
    assert "cudatoolkit-12.9.1" in stderr
    assert "closure-audit check of leaky-1.0 failed" in stderr


def test_a_forbidden_path_with_keep_report(tmp_path):
    out = built(tmp_path, "leaky-kept")
    assert hydra.failed(out)
    products, metrics = read_hydra(out)
    assert set(products) == {("report", "closure-audit"), ("file", "json"), ("file", "summary")}
    toolkit = built(tmp_path, "toolkit")
    report = check_report(out)
    assert report["passed"] is False
    forbidden = [f for f in report["gate"]["findings"] if f["rule"] == "forbidden-path"]
    assert [f["file"] for f in forbidden] == [toolkit]
    assert metrics["closure.forbidden"] == hydra.Metric(1, "paths")
    assert metrics["findings.errors"].value == report["gate"]["summary"]["findings"]["error"] >= 1
    info = path_info(built(tmp_path, "leaky"))
    assert metrics["closure.bytes"].value == sum(e["narSize"] for e in info.values())
    assert "FAILED" in Path(out, "summary.md").read_text()


def test_an_allowed_path_passes(tmp_path):
    out = built(tmp_path, "leaky-allowed")
    _, metrics = read_hydra(out)
    assert metrics["closure.forbidden"].value == 0 and not hydra.failed(out)


def test_a_budget_broken_fails_the_build(tmp_path):
    stderr = failing(tmp_path, "app-over-budget")
    assert "over its budget" in stderr


def test_a_policy_that_cannot_be_read_fails_even_with_keep_report(tmp_path):
    stderr = failing(tmp_path, "app-unknown-key")
    assert "closure-audit check cannot decide" in stderr and "max-sise" in stderr
    assert "Traceback" not in stderr


def test_a_growth_limit_is_refused_at_evaluation(tmp_path):
    stderr = failing(tmp_path, "app-growth")
    assert "policy cannot set max-growth" in stderr


@pytest.fixture(scope="module")
def gpulib(tmp_path_factory) -> Path:
    nvcc = Nvcc(find_nvcc(), tmp_path_factory.mktemp("nvcc"))
    return nvcc.build("libk.so", gencode("86:sm_86"))


@needs_nvcc
def test_gpu_code_per_capability(tmp_path, gpulib):
    out = built(tmp_path, "gpu-check", gpulib)
    _, metrics = read_hydra(out)
    report = check_report(out)
    assert report["capabilities"] == ["8.6"] and report["passed"] is True
    # The figures archs gives for the same output.
    gpu = built(tmp_path, "gpu", gpulib)
    _, archs = cli_json("archs", gpu, "--capabilities", "8.6", "--no-forward-compat")
    stored = sum(c["stored"] for c in archs["codes"] if c["capability"] == "8.6")
    assert stored > 0
    assert metrics["gpu.8.6.bytes"] == hydra.Metric(stored, "B")
    assert metrics["gpu.bytes"] == hydra.Metric(archs["summary"]["stored"], "B")
    assert [n for n in metrics if n.startswith("gpu.")] == ["gpu.bytes", "gpu.8.6.bytes"]


@needs_nvcc
def test_a_capability_missing_with_keep_report(tmp_path, gpulib):
    out = built(tmp_path, "gpu-missing", gpulib)
    assert hydra.failed(out)
    report = check_report(out)
    assert report["passed"] is False and report["capabilities"] == ["8.6", "9.0"]
    assert "missing-gpu-arch" in report["archs"]["summary"]["rules"]
    _, metrics = read_hydra(out)
    assert metrics["findings.errors"].value >= 1
    assert "gpu.9.0.bytes" not in metrics


def test_the_hydra_reader_skips_what_hydra_skips(tmp_path):
    """The reader the tests above rely on takes only what Hydra takes."""
    out = Path("/nix/store") / ("0" * 32 + "-not-built")  # only its name matters to the rules below
    support = tmp_path / "nix-support"
    support.mkdir()
    (tmp_path / "report.json").write_text("{}")
    (support / "hydra-build-products").write_text(
        f"file json {tmp_path}/report.json\n"            # outside the store
        "file json relative/report.json\n"                # not absolute
        f"fi!e json {out}/report.json\n"                  # TYPE not [A-Za-z0-9_-]+
        f"file json {out}/missing.json\n")                # not present
    kept, skipped = hydra.products(str(tmp_path))
    assert kept == [] and len(skipped) == 4
    (support / "hydra-metrics").write_text(
        "a.b 1 B\n"
        "a.b 2 B\n"             # the last of a name wins
        "c 3.5\n"               # no unit
        "d x B\n"               # not a number: dropped
        "e/f 1 B\n"             # name outside [A-Za-z0-9._-]: dropped
        "g 4 m/s\n")            # unit outside [A-Za-z0-9._%-]: the unit dropped
    metrics, dropped = hydra.metrics(str(tmp_path))
    assert metrics == {"a.b": hydra.Metric(2, "B"), "c": hydra.Metric(3.5, None), "g": hydra.Metric(4, None)}
    assert dropped == ["d x B", "e/f 1 B", "unit of: g 4 m/s"]


def test_the_hydra_reader_on_a_real_output(tmp_path):
    out = built(tmp_path, "app-check")
    text = (f'file json "{out}/report.json"\n'      # quoted: taken
            f"doc readme {out}/../{Path(out).name}/summary.md\n"  # the path resolved into the output: taken
            f"file json {out}/nix-support/../../x\n"  # resolved outside the output: skipped
            f"file json {out}/report.json trailing words\n")  # too many fields: skipped
    kept, skipped = hydra.products(out, text=text)
    assert [(p.type, p.path) for p in kept] == [("file", f"{out}/report.json"),
                                                 ("doc", f"{out}/../{Path(out).name}/summary.md")]
    assert len(skipped) == 2
