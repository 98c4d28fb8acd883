"""audit run in process on trees the tests build: the report, its findings
by rule, and a policy whose host is a directory the test controls."""

from __future__ import annotations

import os

from closure_audit.findings.policy import Policy
from closure_audit.policy.load import parse_policy
from closure_audit.ops.audit import audit as run_audit
from closure_audit.targets import resolve_target, scope_of


def audit(*targets, policy: Policy | None = None, root=None, **kw):
    """The audit of the targets, resolved first as commands/ resolve them."""
    scope = scope_of([resolve_target(str(t), installables=False) for t in targets],
                     root=None if root is None else str(root))
    return run_audit(scope, policy or Policy(), **kw)[0]


def rules(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


def host_policy(host_dir, **extra) -> Policy:
    """A policy whose 'host' is a directory the test controls, plus the real
    libc directory so the C runtime resolves as on any machine."""
    libc_dirs = [d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
                 if os.path.exists(os.path.join(d, "libc.so.6"))]
    return parse_policy({"host": {"directories": [str(host_dir), *libc_dirs], **extra}})


SITE = "venv/lib/python3.12/site-packages"


def venv(root):
    """root/venv made a venv (its pyvenv.cfg): its site-packages, relative to
    root (for the `build` fixture) and absolute."""
    (root / "venv").mkdir(exist_ok=True)
    (root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / SITE).mkdir(parents=True, exist_ok=True)
    return SITE, root / SITE
