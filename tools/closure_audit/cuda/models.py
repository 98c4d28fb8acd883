"""The compute capability of a GPU by its model name, for hosts where
nvidia-smi cannot say (no nvidia-smi, or a driver older than 510, which has
no `compute_cap` field): the kernel module's /proc/driver/nvidia/gpus/*/information
gives only the name. From NVIDIA's CUDA GPUs list; the first match wins, so
longer names come before their prefixes."""

from __future__ import annotations

import re

# (regular expression on the model name, capability)
MODELS = (
    (r"\bG?B300\b", "10.3"),
    (r"\bG?B200\b|\bB100\b", "10.0"),
    (r"\bGB10\b", "12.1"),
    (r"RTX PRO \d+ Blackwell|RTX 50\d\d", "12.0"),
    (r"\bGH200\b|\bH200\b|\bH100\b|\bH800\b|\bH20\b", "9.0"),
    (r"\bL40S?\b|\bL4\b|\bL20\b|RTX 40\d\d|RTX \d+ Ada", "8.9"),
    (r"\bA100\b|\bA800\b|\bA30\b", "8.0"),
    (r"\bA10G?\b|\bA16\b|\bA40\b|\bA2\b|RTX A\d+|RTX 30\d\d", "8.6"),
    (r"\bT4\b|\bT1000\b|\bT600\b|\bT400\b|Quadro RTX|RTX 20\d\d|GTX 16\d\d|TITAN RTX", "7.5"),
    (r"\bV100\b|TITAN V\b|Quadro GV100", "7.0"),
    (r"\bP100\b|Quadro GP100", "6.0"),
    (r"\bP40\b|\bP4\b|\bP6\b|GTX 10\d\d|TITAN Xp|TITAN X \(Pascal\)|Quadro P\d+", "6.1"),
    (r"\bM60\b|\bM40\b|\bM6\b|\bM4\b|GTX 9\d\d|TITAN X\b|Quadro M\d+", "5.2"),
    (r"GTX 750|GTX 745|Quadro K\d+2\b", "5.0"),
    (r"\bK80\b", "3.7"),
    (r"\bK40\b|\bK20X?\b|GTX 780|GTX TITAN", "3.5"),
)
# Jetson modules by the SoC named in the device tree's compatible string.
TEGRA = {"tegra264": "11.0", "tegra234": "8.7", "tegra194": "7.2", "tegra186": "6.2", "tegra210": "5.3"}
TEGRA_NAMES = {"tegra264": "Jetson Thor", "tegra234": "Jetson Orin", "tegra194": "Jetson AGX Xavier / Xavier NX",
               "tegra186": "Jetson TX2", "tegra210": "Jetson Nano / TX1"}


def capability_of(model: str) -> str | None:
    for pattern, capability in MODELS:
        if re.search(pattern, model):
            return capability
    return None
