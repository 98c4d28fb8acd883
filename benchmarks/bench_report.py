"""The report page at scale: `closure-audit report` on synthetic closures of
10,000 paths (and more with --paths), the page's size, and how long headless
Chromium takes from navigation to the treemap on screen.

Targets (issue: a picture of the closure): for 10,000 paths the page is under
8 MB and drawn within 3 s of navigation. The anchor is `closure-audit why`
on the same dump in the same run: reading the dump, the dominator tree and the
forbidden paths are common to both, so the ratio shows what the page adds.

    .venv/bin/python benchmarks/bench_report.py [--paths 10000 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests/support"))  # the suite's synthetic closures and headless Chromium

import synthetic  # noqa: E402
from common import closure_audit_command, measure, verdict  # noqa: E402

MAX_BYTES = 8 * 10**6
MAX_DRAW_MS = 3000


def draw_times(page: Path, runs: int) -> tuple[list[int], int]:
    """Navigation to the first view on screen (the page's data-drawn-ms), in
    a fresh load each run; and how many rectangles that view has."""
    from browser import Browser

    b = Browser()
    try:
        b.open(page)  # warm-up
        times = []
        for _ in range(runs):
            b.open(page)
            times.append(int(b.js("return +document.body.getAttribute('data-drawn-ms')")))
        errors = [m for m in b.console() if m["level"] == "SEVERE"]
        if errors:
            sys.exit(f"benchmark: the page logged errors: {errors}")
        return times, b.js("return document.querySelectorAll('.treemap [data-path]').length")
    finally:
        b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, nargs="+", default=[10_000])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    try:
        import selenium  # noqa: F401  (tests/support/browser.py drives Chromium with it)
    except ImportError:
        sys.exit("benchmark: selenium is missing: run it with the test environment, "
                 ".venv/bin/python benchmarks/bench_report.py (ci/setup makes it)")
    tool = closure_audit_command()
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        print(f"{'paths':>8} {'report s':>9} {'why s':>7} {'ratio':>6} {'peak MB':>8} {'page MB':>8} "
              f"{'drawn':>7} {'draw ms (median of runs)':>25}")
        for n in args.paths:
            dump = Path(tmp) / f"closure-{n}.json"
            synthetic.write(str(dump), n)
            page = Path(tmp) / f"report-{n}.html"
            report = measure("report", [*tool, "report", str(dump), "-o", str(page)], args.runs)
            why = measure("why", [*tool, "why", str(dump)], args.runs)
            if report.returncode not in (0, 1) or not page.is_file():
                sys.exit(f"benchmark: report failed on {n} paths (exit {report.returncode})")
            times, drawn = draw_times(page, args.runs)
            nbytes = page.stat().st_size
            draw = statistics.median(times)
            print(f"{n:>8} {report.seconds:>9.2f} {why.seconds:>7.2f} {report.seconds / why.seconds:>6.2f} "
                  f"{report.peak_mb:>8.0f} {nbytes / 1e6:>8.2f} {drawn:>7} {draw:>10.0f} {times}")
            if n <= 10_000:
                ok &= nbytes < MAX_BYTES and draw < MAX_DRAW_MS
                print(f"         10,000-path targets: page < 8 MB {verdict(nbytes < MAX_BYTES)}, "
                      f"drawn < 3 s {verdict(draw < MAX_DRAW_MS)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
