"""findings/doctor/driver.py on its own: the host's kind, the driver
library a target would load, the user-space driver against the kernel
module; a page of records in (tests/support/doctorrecords.py), lines and
findings out."""

from __future__ import annotations

from closure_audit.cuda.release import Need
from closure_audit.findings.doctor import driver
from closure_audit.host.probe import NIXOS_DRIVER_DIR
from closure_audit.modes import NIX_STORE
from doctorrecords import LIBCUDA, STORE_OBJECT, findings_of, host, page, store, tree


def test_the_host_line_names_a_root_other_than_slash():
    p = page(host())
    driver.host_kind(p)
    assert p.checks[0].message == "Ubuntu 24.04" and p.checks[0].status == "ok"
    h = host()
    h.root = "/mnt/other"
    p = page(h)
    driver.host_kind(p)
    assert p.checks[0].message == "Ubuntu 24.04 (under /mnt/other)"


def test_a_tree_loads_the_hosts_driver():
    p = page(host())
    assert driver.driver_library(p, tree()) == "580.82.07"
    (line,) = p.checks
    assert line.status == "ok" and line.message == f"1 object of the target load the host's driver: {LIBCUDA}"


def test_no_driver_on_the_host_is_said_once_with_the_driver_a_target_needs():
    p = page(host(driver=None, kernel=None))
    target = tree([Need((13, 0), True, "DT_NEEDED libcudart.so.13.0.96", "/venv/libcudart.so.13.0.96")])
    assert driver.driver_library(p, target) is None
    assert driver.driver_library(p, target) is None
    (line,) = p.checks
    assert line.rule == "driver-missing" and line.status == "error"
    assert "install the NVIDIA driver 580.65.06 or newer" in line.fixes[0].text


def test_a_store_path_reaches_the_driver_through_its_driver_directory_or_not():
    h = host()
    h.nix_driver = f"{NIXOS_DRIVER_DIR}/libcuda.so.1"
    p = page(h, NIX_STORE)
    assert driver.driver_library(p, store()) == "580.82.07"
    assert p.checks[-1].status == "ok" and f"find it through {NIXOS_DRIVER_DIR}" in p.checks[-1].message
    p = page(host(), NIX_STORE)  # a distribution without /run/opengl-driver/lib
    driver.driver_library(p, store(reached=[]))
    (line,) = p.checks
    assert (line.rule, line.status) == ("driver-unreachable", "error")
    assert [f.text.split(":")[0] for f in line.fixes][:1] == ["run each program through nix-gl-host"]
    assert any("sudo ln -sf /usr/lib/x86_64-linux-gnu/libcuda.so* " in f.text for f in line.fixes)


def test_the_targets_own_defects_decide_whatever_the_host():
    p = page(host(), NIX_STORE)
    assert driver.driver_library(p, store(without=[STORE_OBJECT], reached=[])) == "580.82.07"
    (line,) = p.checks
    assert line.rule == "driver-unreachable" and "has no driver directory in its runpath" in line.message
    assert line.fixes[0].text == "rebuild it with autoAddOpenGLRunpathHook in nativeBuildInputs"
    stub = "/nix/store/bbbb-cuda_cudart-13.0.96-stubs/lib/stubs/libcuda.so.1"
    p = page(host(), NIX_STORE)
    assert driver.driver_library(p, store(bundled=[stub])) is None
    assert p.checks[0].rule == "driver-unreachable" and "a stub that reports no GPU" in p.checks[0].message
    p = page(host(), NIX_STORE)
    compat = store(compat=("/nix/store/cccc-cuda_compat/lib/libcuda.so.1", "580.95.05"))
    assert driver.driver_library(p, compat) == "580.95.05"
    assert p.checks[0].status == "ok" and "forward compatibility" in p.checks[0].message


def test_user_space_driver_against_the_kernel_module():
    p = page(host(driver="580.95.05", kernel="580.82.07"))
    driver.kernel_module(p, "580.95.05", compat=False)
    f = findings_of(p)["driver-kernel-mismatch"]
    assert (f.fields["user_version"], f.fields["kernel_version"]) == ("580.95.05", "580.82.07")
    p = page(host(driver="580.95.05", kernel="580.82.07"))
    driver.kernel_module(p, "580.95.05", compat=True)  # cuda_compat's driver may differ from the module
    assert p.checks[0].status == "ok" and "(forward compatibility: they may differ)" in p.checks[0].message
    p = page(host())
    driver.kernel_module(p, "580.82.7", compat=False)  # compared as numbers: 07 is 7
    assert p.checks[0].status == "ok" and not p.findings.sorted()
    p = page(host())
    driver.kernel_module(p, None, compat=False)
    assert p.checks[0].rule == "driver-version-unknown"


def test_hosts_without_a_linux_kernel_module_to_compare():
    p = page(host(kind="wsl", kernel=None))
    driver.kernel_module(p, "580.82.07", compat=False)
    assert p.checks[0].status == "ok" and p.checks[0].message.startswith("WSL")
    p = page(host(kind="jetson", kernel=None, tegra_release="R36.3.0"))
    driver.kernel_module(p, "540.3.0", compat=False)
    assert p.checks[0].message == "Jetson: the GPU driver is part of L4T R36.3.0"
    p = page(host(kernel=None))
    driver.kernel_module(p, "580.82.07", compat=False)
    assert p.checks[0].rule == "driver-missing" and p.checks[0].fixes[0].text.startswith("load it: sudo modprobe")
    p = page(host(driver=None, kernel=None))
    driver.kernel_module(p, None, compat=False)
    assert p.checks == []  # no driver at all was said already
