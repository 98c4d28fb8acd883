"""findings/doctor/runtime.py on its own: the CUDA release a target needs
(its evidence) against the host's driver, with NVIDIA's driver table
(cuda/driver.py) as the judge of what is enough."""

from __future__ import annotations

from closure_audit.cuda.driver import needs
from closure_audit.cuda.release import Need
from closure_audit.findings.doctor.runtime import cuda_runtime
from closure_audit.modes import NIX_STORE
from doctorrecords import findings_of, host, page, store, tree

CUDART = Need((13, 0), True, "DT_NEEDED libcudart.so.13.0.96", "/venv/nvidia/cu13/lib/libcudart.so.13.0.96")
WHEEL = Need((13, 0), False, "wheel nvidia_cublas-13.1.0.3.dist-info", "/venv/nvidia_cublas-13.1.0.3.dist-info")
OLD = Need((12, 8), True, "torch/version.py cuda = '12.8'", "/venv/torch/version.py")


def line(driver_version, target, h=None):
    p = page(h or host(driver=driver_version, kernel=driver_version), target.mode)
    cuda_runtime(p, target, driver_version)
    return p


def test_a_driver_at_the_releases_own_minimum_is_enough():
    own, floor = needs((13, 0))
    p = line(own, tree([CUDART, WHEEL, OLD]))
    (check,) = p.checks
    assert check.status == "ok" and check.rule is None
    assert check.message.startswith("CUDA 13.0 (from DT_NEEDED libcudart.so.13.0.96; 2 more pieces of evidence)")
    assert [n.label for n in check.evidence] == ["13.0", "13.x", "12.8"]  # highest first, each source once


def test_between_the_floor_and_the_own_minimum_runs_by_minor_version_compatibility():
    p = line("575.51.03", tree([Need((12, 9), True, "DT_NEEDED libcudart.so.12.9.79", "/venv/libcudart.so.12.9.79"),
                                Need((12, 9), True, "DT_NEEDED libcudart.so.12.9.79", "/venv/libcudart.so.12.9.79")]))
    assert p.checks[0].status == "ok"
    p = line("560.28.03", tree([Need((12, 9), True, "DT_NEEDED libcudart.so.12.9.79", "/venv/libcudart.so.12.9.79")]))
    f = findings_of(p)["driver-minor-compat"]
    assert (f.severity, f.fields["needs"], f.fields["runtime"], f.fields["driver"]) == (
        "warning", "575.51.03", "12.9", "560.28.03")


def test_below_the_floor_nothing_runs_and_the_fixes_say_what_would():
    p = line("570.86.10", store([CUDART]), host(driver="570.86.10", kernel="570.86.10", kind="nixos"))
    f = findings_of(p)["driver-too-old"]
    assert f.severity == "error" and f.fields["needs"] == "580.65.06"
    texts = [x["text"] for x in f.fields["fixes"]]
    assert texts[0].startswith("upgrade the NVIDIA driver to 580.65.06 or newer in configuration.nix")
    assert texts[1].startswith("or rebuild the target with cudaPackages_12_8")
    assert "cudaPackages.cuda_compat" in texts[2]


def test_a_driver_whose_version_is_unknown_or_none_at_all():
    p = line(None, tree([CUDART]), host(driver=None, kernel=None))
    assert p.checks[0].status == "ok" and p.checks[0].message.endswith("this host has none")
    h = host(driver=None)
    h.driver = host().driver
    h.driver.version = None
    p = line(None, tree([CUDART]), h)
    assert findings_of(p)["driver-version-unknown"].file == CUDART.file


def test_a_runtime_found_nowhere_and_its_fix_in_each_mode():
    p = line("580.82.07", tree(runtime_missing={"libcudart.so.13": "/venv/_C.so"}))
    f = findings_of(p)["cuda-runtime-missing"]
    assert f.fields["wheel"] == "nvidia-cuda-runtime==13.*" and len(p.checks) == 1
    p = line("580.82.07", store(runtime_missing={"libcudart.so.13": "/nix/store/aaaa-x/lib/libx.so"}))
    f = findings_of(p)["cuda-runtime-missing"]
    assert f.fields["wheel"] is None and "cudaPackages.cuda_cudart" in f.fields["fixes"][0]["text"]
    assert p.findings.mode == NIX_STORE


def test_a_target_that_names_no_release():
    p = line("580.82.07", tree())
    assert p.checks[0].message.startswith("the target names no CUDA release") and p.checks[0].evidence == []
