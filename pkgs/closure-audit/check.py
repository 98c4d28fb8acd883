"""The builder of closureAuditCheck (check.nix): runs `closure-audit gate` on
the closure closureInfo wrote and, when capabilities are given, `closure-audit
archs` on the package's own outputs, then writes the report, its summary and
the files Hydra reads from nix-support/ (docs/nix/checks.md).

Exit status: 0 when the policy holds, or when it does not and the report is
kept (nix-support/failed says so to Hydra); 1 when it does not; 2 when a
command could not decide (bad input, an unreadable closure): that always
fails the build, a report that decides nothing is never kept as a pass.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SCHEMA = "closure-audit-check/1"
ELF_MAGIC = b"\x7fELF"


class Undecided(Exception):
    """A command said it could not decide; the build fails whatever keepReport says."""


def run(cmd: list[str], stdout_file: str | None = None) -> tuple[int, str]:
    """Run a closure-audit command; return its exit status and standard output."""
    env = dict(os.environ, NO_COLOR="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    sys.stderr.write(p.stderr)
    if p.returncode not in (0, 1):
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise Undecided(f"{cmd[1]}: {last}")
    if stdout_file:
        with open(stdout_file, "w", encoding="utf-8") as f:
            f.write(p.stdout)
    return p.returncode, p.stdout


def parse(command: str, text: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Undecided(f"{command}: its JSON report does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise Undecided(f"{command}: its JSON report is not an object")
    return data


def has_elf(paths: list[str]) -> bool:
    """Whether any regular file under `paths` is an ELF file: `archs` refuses
    a target without one, and an output of headers has no GPU code to judge."""
    for top in paths:
        for d, _, files in os.walk(top):
            for name in files:
                p = os.path.join(d, name)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                with open(p, "rb") as f:
                    if f.read(4) == ELF_MAGIC:
                        return True
    return False


def gpu_bytes(archs: dict) -> dict[str, int]:
    """Bytes of GPU code per capability, every kind (cubin, PTX, LTO IR) of it
    together, from archs' `codes`."""
    out: dict[str, int] = {}
    for code in archs.get("codes", []):
        cap = code.get("capability")
        if isinstance(cap, str) and isinstance(code.get("stored"), int):
            out[cap] = out.get(cap, 0) + code["stored"]
    return dict(sorted(out.items()))


def metrics(gate: dict, archs: dict | None) -> dict[str, dict]:
    """What Hydra charts: NAME -> {value, unit}. Names and units keep to
    Hydra's [A-Za-z0-9._-] (docs/nix/checks.md)."""
    target = gate["targets"][0]
    forbidden = {f["file"] for f in gate.get("findings", []) if f.get("rule") == "forbidden-path"}
    errors = gate["summary"]["findings"]["error"] + (archs["summary"]["findings"]["error"] if archs else 0)
    m = {
        "closure.bytes": {"value": target["closure_size"], "unit": "B"},
        "closure.paths": {"value": target["paths"], "unit": "paths"},
        "closure.forbidden": {"value": len(forbidden), "unit": "paths"},
        "findings.errors": {"value": errors, "unit": "findings"},
    }
    if archs is not None:
        m["gpu.bytes"] = {"value": archs["summary"]["stored"], "unit": "B"}
        for cap, n in gpu_bytes(archs).items():
            m[f"gpu.{cap}.bytes"] = {"value": n, "unit": "B"}
    return m


def summary(name: str, passed: bool, m: dict, gate_md: str, archs_text: str | None, note: str | None) -> str:
    lines = [f"# closure-audit check of {name}: {'passed' if passed else 'FAILED'}", "",
             "| metric | value | unit |", "| --- | --- | --- |"]
    lines += [f"| {k} | {v['value']} | {v['unit']} |" for k, v in m.items()]
    lines += ["", gate_md.strip(), ""]  # the gate's own heading
    if archs_text is not None:
        lines += ["## GPU code", "", "```", archs_text.rstrip(), "```", ""]
    elif note:
        lines += ["## GPU code", "", note, ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="closure-audit-check")
    ap.add_argument("--name", required=True)
    ap.add_argument("--registration", required=True)
    ap.add_argument("--budgets", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--capabilities", default="")
    ap.add_argument("--forward-compat", choices=["", "yes", "no"], default="")
    ap.add_argument("--keep-report", action="store_true")
    ap.add_argument("outputs", nargs="+")
    a = ap.parse_args(argv)

    out, support = a.out, os.path.join(a.out, "nix-support")
    os.makedirs(support, exist_ok=True)
    gate_md = os.path.join(a.out, "gate.md")
    status, text = run(["closure-audit", "gate", "--budgets", a.budgets, "--path-info",
                        f"closure={a.registration}", "--json", "--markdown", gate_md,
                        "--html", os.path.join(out, "report.html")])
    gate = parse("gate", text)
    passed = status == 0

    archs, archs_text, note = None, None, None
    if a.capabilities and not has_elf(a.outputs):
        note = "No ELF file in the outputs: no GPU code to judge."
    elif a.capabilities:
        cmd = ["closure-audit", "archs", *a.outputs, "--capabilities", a.capabilities]
        if a.forward_compat:
            cmd.append("--forward-compat" if a.forward_compat == "yes" else "--no-forward-compat")
        archs_status, text = run([*cmd, "--json"])
        archs = parse("archs", text)
        _, archs_text = run(cmd)
        passed = passed and archs_status == 0

    m = metrics(gate, archs)
    report = {"schema": SCHEMA, "name": a.name, "outputs": a.outputs, "passed": passed,
              "capabilities": a.capabilities.split(",") if a.capabilities else None,
              "metrics": m, "gate": gate, "archs": archs}
    with open(os.path.join(out, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    with open(gate_md, encoding="utf-8") as f:
        md = summary(a.name, passed, m, f.read(), archs_text, note)
    os.remove(gate_md)
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(md + "\n")
    with open(os.path.join(support, "hydra-build-products"), "w", encoding="utf-8") as f:
        f.write(f"report closure-audit {out} report.html\n"
                f"file json {out}/report.json\n"
                f"file summary {out}/summary.md\n")
    with open(os.path.join(support, "hydra-metrics"), "w", encoding="utf-8") as f:
        f.writelines(f"{k} {v['value']} {v['unit']}\n" for k, v in m.items())
    sys.stderr.write(md + "\n")
    if passed:
        return 0
    if a.keep_report:
        # Hydra marks the build "failed with output" and keeps the report.
        with open(os.path.join(support, "failed"), "w", encoding="utf-8") as f:
            f.write(f"closure-audit check of {a.name} failed: see report.html\n")
        return 0
    sys.stderr.write(f"closure-audit check of {a.name} failed (keepReport = true keeps the report)\n")
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Undecided as exc:
        sys.stderr.write(f"closure-audit check cannot decide: {exc}\n")
        sys.exit(2)
