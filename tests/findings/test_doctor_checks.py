"""findings/doctor/ on its own: records of a host and a target in, lines and
findings out; nothing read from disk (the doctor command's tests run it
whole on fake hosts)."""

from __future__ import annotations

from closure_audit.cuda.release import Need
from closure_audit.findings.collector import Findings
from closure_audit.findings.doctor import TargetFacts, judge_doctor
from closure_audit.policy.load import parse_policy
from closure_audit.host.probe import Host
from doctorrecords import host, tree


def judged(h: Host, targets: list[TargetFacts]):
    findings = Findings(parse_policy({}), "tree")
    checks = judge_doctor(h, targets, findings)
    return {c.check: c for c in checks}, {f.rule: f for f in findings.sorted()}


def test_a_healthy_host_alone_is_all_ok_once_nix_programs_reach_its_driver():
    h = host()
    checks, findings = judged(h, [])
    assert list(checks) == ["host", "driver-library", "kernel-module", "gpus"]
    assert checks["driver-library"].status == "warning" and list(findings) == ["no-driver-directory"]
    assert "nixglhost" in findings["no-driver-directory"].fields["fixes"][0]["text"]
    h.nix_driver = "/run/opengl-driver/lib/libcuda.so.1"
    checks, findings = judged(h, [])
    assert [c.status for c in checks.values()] == ["ok"] * 4 and not findings


def test_a_driver_changed_under_a_loaded_module():
    checks, findings = judged(host(driver="580.95.05", kernel="580.82.07"), [])
    assert checks["kernel-module"].status == "error"
    f = findings["driver-kernel-mismatch"]
    assert (f.fields["user_version"], f.fields["kernel_version"]) == ("580.95.05", "580.82.07")
    assert f.fields["fixes"][0]["text"].startswith("reboot")


def test_a_runtime_newer_than_the_driver_fails_with_its_fixes():
    need = Need((13, 0), True, "DT_NEEDED libcudart.so.13.0.96", "/venv/libcudart.so.13.0.96")
    checks, findings = judged(host(driver="570.86.10", kernel="570.86.10"), [tree([need])])
    f = findings["driver-too-old"]
    assert checks["cuda-runtime"].status == "error" and f.fields["needs"] == "580.65.06"
    texts = [fix["text"] for fix in f.fields["fixes"]]
    assert texts[0].startswith("upgrade the NVIDIA driver to 580.65.06 or newer with Ubuntu's package")
    assert any("CUDA 12.8 is the newest release driver 570.86.10 runs fully" in t for t in texts)


def test_a_missing_runtime_names_the_wheel():
    checks, findings = judged(host(), [tree(runtime_missing={"libcudart.so.13": "/venv/_C.so"})])
    f = findings["cuda-runtime-missing"]
    assert f.fields["wheel"] == "nvidia-cuda-runtime==13.*" and f.file == "/venv/_C.so"
    assert f.fields["fixes"][0]["text"] == 'pip install "nvidia-cuda-runtime==13.*"'
