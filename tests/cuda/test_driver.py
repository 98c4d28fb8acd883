"""cuda/driver.py on its own: versions read from names and from the kernel
module's file, and the drivers a CUDA release needs."""

from __future__ import annotations

from closure_audit.cuda.driver import (at_least, kernel_module_version, library_version_from_name, needs,
                                       parse_version)


def test_versions_compare_as_numbers():
    assert parse_version("580.65.06") == (580, 65, 6) and parse_version(" 12.9 ") == (12, 9)
    assert parse_version("") is None and parse_version("580.x") is None and parse_version(None) is None
    assert at_least("580.65.06", "580.65.6") and at_least("1000.1", "999.99.99") and not at_least("575.9", "575.51")


def test_a_release_needs_its_own_driver_and_its_majors_floor():
    assert needs((13, 0)) == ("580.65.06", "580.65.06")
    assert needs((12, 9)) == ("575.51.03", "525.60.13")
    assert needs((12, 7)) == ("560.28.03", "525.60.13")  # an unlisted minor takes the nearest listed below
    assert needs((11, 8)) == (None, "450.80.02") and needs((14, 0)) == (None, None)


def test_versions_from_names_and_the_kernel_modules_file():
    assert library_version_from_name("libcuda.so.580.82.07") == "580.82.07"
    assert library_version_from_name("libnvidia-ml.so.575.51") == "575.51"
    assert library_version_from_name("libcuda.so.1.1") is None and library_version_from_name("libcuda.so.1") is None
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.82.07  Fri Aug 22 2025\nGCC version: 14"
    open_module = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build"
    assert kernel_module_version(proprietary) == "580.82.07" and kernel_module_version(open_module) == "580.95.05"
    assert kernel_module_version("") is None and kernel_module_version(None) is None
