"""findings/doctor/fixes.py on its own: how each kind of host gets a
driver, and what a pip tree installs for a CUDA release. (Named apart from
tests/commands/test_doctor_fixes.py, which applies doctor's fixes to fake
hosts.)"""

from __future__ import annotations

import pytest

from closure_audit.findings.doctor.fixes import driver_fix, wheels
from doctorrecords import host


@pytest.mark.parametrize("kind, starts, trade_off", [
    ("nixos", "upgrade the NVIDIA driver to 580.65.06 or newer in configuration.nix", "the NixOS way"),
    ("container", "upgrade the NVIDIA driver to 580.65.06 or newer on the machine that runs the container",
     "NVIDIA Container Toolkit"),
    ("wsl", "upgrade the NVIDIA driver to 580.65.06 or newer on Windows", "never install a Linux driver"),
    ("jetson", "upgrade the NVIDIA driver to 580.65.06 or newer: flash a JetPack release", "part of L4T"),
    ("distro", "upgrade the NVIDIA driver to 580.65.06 or newer with Ubuntu's package: sudo apt install "
               "nvidia-driver-580, then reboot", "the distribution's packages"),
])
def test_each_kind_of_host_gets_its_own_way(kind, starts, trade_off):
    fix = driver_fix(host(kind=kind), "580.65.06", upgrade=True)
    assert fix.text.startswith(starts) and trade_off in fix.trade_off


def test_a_distribution_other_than_ubuntu_and_no_version_asked():
    h = host()
    h.distribution = ("fedora",)
    assert driver_fix(h, None).text == ("install the NVIDIA driver from the distribution's packages (or NVIDIA's "
                                        "installer), then reboot")
    assert "sudo ubuntu-drivers install" in driver_fix(host(), None).text


def test_the_wheels_of_a_release():
    assert wheels((13, 0), None) == ("the CUDA 13 wheels (nvidia-cuda-runtime==13.* and the other nvidia-* wheels)")
    text = wheels((12, 8), "2.9.1")
    assert text.startswith("the CUDA 12 wheels (nvidia-cuda-runtime-cu12 and the other nvidia-*-cu12 wheels)")
    assert 'pip install "torch==2.9.1" from PyTorch\'s cu128 wheel index' in text
