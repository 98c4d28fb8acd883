"""findings/doctor/page.py on its own: a check's line, and with a rule the
finding beside it, whose severity after the policy is the line's status."""

from __future__ import annotations

from closure_audit.cuda.release import Need
from closure_audit.findings.collector import Findings
from closure_audit.findings.doctor.facts import Fix
from closure_audit.findings.doctor.page import HOST_ABSENT, Page
from closure_audit.findings.policy import Policy
from closure_audit.modes import TREE
from doctorrecords import findings_of, host, page


def test_a_line_without_a_rule_is_ok_and_adds_no_finding():
    p = Page(host(), Findings(Policy(), TREE))
    assert (p.checks, p.prefix, p.cuda) == ([], "", True)
    p.line("host", "Ubuntu 24.04")
    assert [(c.check, c.status, c.rule) for c in p.checks] == [("host", "ok", None)] and not p.findings.sorted()


def test_a_rules_line_takes_the_policys_severity_and_carries_its_fixes():
    need = Need((13, 0), True, "DT_NEEDED libcudart.so.13.0.96", "/venv/libcudart.so.13.0.96")
    p = page(host(), policy={"severity": {"driver-too-old": "warning"}})
    p.prefix = "/venv: "
    p.line("cuda-runtime", "too old", rule="driver-too-old", file="/venv/x.so", fixes=[Fix("upgrade", "a reboot")],
           evidence=[need], needs="580.65.06")
    (check,) = p.checks
    assert (check.status, check.message, check.evidence) == ("warning", "/venv: too old", [need])
    f = findings_of(p)["driver-too-old"]
    assert (f.severity, f.file, f.message) == ("warning", "/venv/x.so", "/venv: too old")
    assert f.fields["fixes"] == [{"text": "upgrade", "trade_off": "a reboot"}]
    assert f.fields["evidence"] == [need.to_json()] and f.fields["needs"] == "580.65.06"
    p = page(host(), policy={"severity": {"driver-too-old": "off"}})
    p.line("cuda-runtime", "too old", rule="driver-too-old")
    assert p.checks[0].status == "ok" and not p.findings.sorted()


def test_what_the_host_lacks_is_information_when_no_target_uses_cuda():
    assert set(HOST_ABSENT) == {"driver-missing", "gpu-not-found"}
    p = page(host(gpus=()))
    p.line("gpus", "no NVIDIA GPU found", rule="gpu-not-found")
    assert p.checks[0].status == "error"
    p = page(host(gpus=()))
    p.cuda = False
    p.line("gpus", "no NVIDIA GPU found", rule="gpu-not-found")
    assert p.checks[0].status == "info" and p.checks[0].message.endswith("; no target uses CUDA")
    assert findings_of(p)["gpu-not-found"].file == "/"  # the host's root when no file is named
    p.line("cuda-runtime", "too old", rule="driver-too-old")  # a target's fault: never lowered
    assert p.checks[-1].status == "error"
