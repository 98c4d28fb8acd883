"""cuda/models.py on its own: a GPU's compute capability from its model
name, as nvidia-smi and the kernel module's /proc file write it, and the
Jetson SoCs; every capability named is one CUDA knows."""

from __future__ import annotations

import pytest

from closure_audit.cuda.code import capability_table
from closure_audit.cuda.models import MODELS, TEGRA, TEGRA_NAMES, capability_of


@pytest.mark.parametrize("model, capability", [
    ("NVIDIA GeForce RTX 3090", "8.6"), ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA A10G", "8.6"),
    ("NVIDIA A10", "8.6"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GH200 480GB", "9.0"),
    ("NVIDIA GB200", "10.0"), ("NVIDIA B300 SXM6", "10.3"), ("NVIDIA GeForce RTX 5090", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"), ("NVIDIA L40S", "8.9"), ("NVIDIA L4", "8.9"),
    ("Tesla T4", "7.5"), ("Tesla V100-SXM2-16GB", "7.0"), ("Tesla P100-PCIE-16GB", "6.0"), ("Tesla K80", "3.7"),
    ("NVIDIA GeForce GTX 1080 Ti", "6.1"), ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA GB10", "12.1"),
])
def test_a_model_name_tells_its_capability(model, capability):
    assert capability_of(model) == capability


@pytest.mark.parametrize("model", ["NVIDIA A1000", "NVIDIA H1000", "Matrox G200", "G300", ""])
def test_a_name_the_table_does_not_know(model):
    """A longer number is another model: \\b keeps A100's pattern off A1000;
    GB200's and B300's patterns take no G200 or G300."""
    assert capability_of(model) is None


def test_every_capability_named_is_one_cuda_knows():
    known = capability_table()
    assert {c for _p, c in MODELS} <= set(known) and set(TEGRA.values()) <= set(known)
    assert set(TEGRA) == set(TEGRA_NAMES)
