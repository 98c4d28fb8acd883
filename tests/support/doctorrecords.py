"""Records of a host and a target as the doctor's checks take them
(findings/doctor/), for their own tests: nothing is probed or read."""

from __future__ import annotations

from closure_audit.findings.collector import Findings
from closure_audit.findings.doctor import DriverUse, TargetFacts
from closure_audit.findings.doctor.page import Page
from closure_audit.policy.load import parse_policy
from closure_audit.host.probe import DriverLibrary, Gpu, Host
from closure_audit.modes import NIX_STORE, TREE

LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
STORE_OBJECT = "/nix/store/aaaa-torch-2.9.1/lib/libtorch_cuda.so"


def host(driver: str | None = "580.82.07", kernel: str | None = "580.82.07", gpus=("8.6",), kind="distro",
         **kw) -> Host:
    lib = DriverLibrary(LIBCUDA, LIBCUDA, driver, "file name") if driver else None
    return Host("/", kind, "Ubuntu 24.04", ("ubuntu", "debian"), driver_dirs=["/usr/lib/x86_64-linux-gnu"],
                driver=lib, kernel_module=kernel, gpus=[Gpu("NVIDIA GeForce RTX 3090", c, "nvidia-smi") for c in gpus],
                **kw)


def tree(needs=(), runtime_missing=None, gpu_code=None, **kw) -> TargetFacts:
    return TargetFacts(targets=["/venv"], mode=TREE,
                       driver=DriverUse(objects=["/venv/libtorch_cuda.so"], driver_dirs=[], without=[], bundled=[],
                                        reached=[]),
                       needs=list(needs), runtime_missing=runtime_missing or {}, compat=None,
                       gpu_code=gpu_code or {}, **kw)


def store(needs=(), runtime_missing=None, gpu_code=None, compat=None, **use) -> TargetFacts:
    """A store path whose object loads libcuda.so.1; `use`: DriverUse's fields
    (by default it reaches the driver through /run/opengl-driver/lib)."""
    driver = dict(objects=[STORE_OBJECT], driver_dirs=["/run/opengl-driver/lib"], without=[], bundled=[],
                  reached=["/run/opengl-driver/lib"]) | use
    return TargetFacts(targets=["/nix/store/aaaa-torch-2.9.1"], mode=NIX_STORE, driver=DriverUse(**driver),
                       needs=list(needs), runtime_missing=runtime_missing or {}, compat=compat,
                       gpu_code=gpu_code or {})


def page(h: Host, mode=TREE, policy=None) -> Page:
    return Page(h, Findings(parse_policy(policy or {}), mode))


def findings_of(p: Page) -> dict:
    return {f.rule: f for f in p.findings.sorted()}
