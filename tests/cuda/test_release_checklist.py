"""The CUDA-release checklist of docs/nix/cuda-packages.md, one test a step:
each fails until its step is done for every CUDA set in
pkgs/cuda/releases.json and every capability in lib/data/cuda-capabilities.json."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from closure_audit.cuda.code import capability_table
from closure_audit.cuda.driver import MINOR_COMPAT_DRIVER, TOOLKIT_DRIVER, at_least
from closure_audit.cuda.models import MODELS, TEGRA

pytestmark = pytest.mark.skipif(not (ROOT / "pkgs").is_dir(), reason="a source tree without pkgs/ (the Nix package's check)")

RELEASES = json.loads((ROOT / "pkgs/cuda/releases.json").read_text()) if (ROOT / "pkgs").is_dir() else {"sets": {}}
SETS = RELEASES["sets"]


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


@pytest.mark.parametrize("cuda", sorted(SETS))
def test_step_1_the_manifests_are_in_the_project(cuda):
    for release in (SETS[cuda]["cuda"], SETS[cuda]["cudnn"]):
        assert (ROOT / f"pkgs/cuda/manifests/redistrib_{release}.json").is_file(), release


@pytest.mark.parametrize("cuda", sorted(SETS))
def test_step_2_the_output_lists_are_made(cuda):
    major = cuda.split(".")[0]
    assert (ROOT / f"pkgs/cuda/outputs/{SETS[cuda]['cuda']}.json").is_file()
    assert (ROOT / f"pkgs/cuda/outputs/cudnn-{SETS[cuda]['cudnn']}-cuda{major}.json").is_file()


@pytest.mark.parametrize("cuda", sorted(SETS))
def test_step_3_the_driver_table_knows_the_release(cuda):
    """doctor judges a runtime against the driver it needs: a set without an
    entry would be judged against none."""
    major, minor = version(cuda)
    assert (major, minor) in TOOLKIT_DRIVER, f"cuda/driver.py TOOLKIT_DRIVER lacks CUDA {cuda}"
    assert major in MINOR_COMPAT_DRIVER, f"cuda/driver.py MINOR_COMPAT_DRIVER lacks CUDA {major}"
    assert at_least(TOOLKIT_DRIVER[major, minor], MINOR_COMPAT_DRIVER[major])


def test_step_3_driver_minimums_rise_with_the_release():
    ordered = [TOOLKIT_DRIVER[k] for k in sorted(TOOLKIT_DRIVER)]
    assert all(at_least(b, a) for a, b in zip(ordered, ordered[1:])), ordered


@pytest.mark.parametrize("cuda", sorted(SETS))
def test_step_4_the_capability_table_and_its_defaults_cover_the_release(cuda):
    supported = [c for c, e in capability_table().items()
                 if version(e["first"]) <= version(cuda) and (e["last"] is None or version(cuda) <= version(e["last"]))]
    assert supported, f"no capability of lib/data/cuda-capabilities.json is supported by CUDA {cuda}"
    golden = json.loads((ROOT / "tests/golden/cuda-flags.json").read_text())["defaults"]
    assert cuda in golden, f"tests/golden/cuda-flags.json has no default capabilities for CUDA {cuda}"


def test_step_5_every_current_capability_has_a_gpu_that_names_it():
    """doctor reads a GPU's capability from its model name where nvidia-smi
    cannot say: each capability still supported needs a model (cuda/models.py)
    or, for Jetson, a SoC (TEGRA)."""
    named = {c for _pattern, c in MODELS} | set(TEGRA.values())
    current = {c for c, e in capability_table().items() if e["last"] is None}
    assert current <= named, sorted(current - named)
