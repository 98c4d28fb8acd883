"""Hydra's reading of an output's nix-support/ files, for the checks' tests.

The rules of Hydra's parser (the nix-support crate, formerly the queue
runner's build-result.cc): a product line is `TYPE SUBTYPE PATH
[DEFAULTPATH]`, TYPE and SUBTYPE `[A-Za-z0-9_-]+`, PATH absolute, in the
store and present in the output, optionally double-quoted; a line that does
not match is skipped silently. A metric line is `NAME VALUE [UNIT]`, NAME
`[A-Za-z0-9._-]+`, VALUE a float (else the line is dropped), UNIT
`[A-Za-z0-9._%-]+` (else the unit is dropped); a name given twice keeps the
last value. A file named `failed` marks the build "failed with output".

Each parser returns what Hydra keeps and the lines it would not take, so a
test asserts that nothing was skipped.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

TYPE = r"[A-Za-z0-9_-]+"
PRODUCT = re.compile(rf'^({TYPE})\s+({TYPE})\s+("[^"]+"|[^"\s<>]+)(?:\s+([^"\s<>]+))?\s*$')
METRIC_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
METRIC_UNIT = re.compile(r"^[A-Za-z0-9._%-]+$")


@dataclass
class Product:
    type: str
    subtype: str
    path: str
    default_path: str | None


@dataclass
class Metric:
    value: float
    unit: str | None


def products(output: str, store_dir: str = "/nix/store", text: str | None = None) -> tuple[list[Product], list[str]]:
    """The products Hydra lists for `output` (from `text` instead of its
    nix-support/hydra-build-products when given), and the lines it skips."""
    kept, skipped = [], []
    if text is None:
        text = open(os.path.join(output, "nix-support", "hydra-build-products"), encoding="utf-8").read()
    for line in text.splitlines():
        m = PRODUCT.match(line)
        if not m:
            skipped.append(line)
            continue
        path = m.group(3).strip('"')
        real = os.path.realpath(path)
        inside = real == output or real.startswith(output + "/")
        if not (os.path.isabs(path) and path.startswith(store_dir + "/") and inside and os.path.exists(path)):
            skipped.append(line)
            continue
        kept.append(Product(m.group(1), m.group(2), path, m.group(4)))
    return kept, skipped


def metrics(output: str) -> tuple[dict[str, Metric], list[str]]:
    """The metrics Hydra stores for `output` (the last of a name wins), and
    the lines or units it drops."""
    kept: dict[str, Metric] = {}
    dropped = []
    text = open(os.path.join(output, "nix-support", "hydra-metrics"), encoding="utf-8").read()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) not in (2, 3) or not METRIC_NAME.match(fields[0]):
            dropped.append(line)
            continue
        try:
            value = float(fields[1])
        except ValueError:
            dropped.append(line)
            continue
        if not math.isfinite(value):
            dropped.append(line)
            continue
        unit = fields[2] if len(fields) == 3 else None
        if unit is not None and not METRIC_UNIT.match(unit):
            dropped.append(f"unit of: {line}")
            unit = None
        kept[fields[0]] = Metric(value, unit)
    return kept, dropped


def failed(output: str) -> bool:
    """Whether Hydra gives the build status 6, "failed with output"."""
    return os.path.exists(os.path.join(output, "nix-support", "failed"))
