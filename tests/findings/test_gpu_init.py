"""findings/gpu_init.py on its own: processes as records (what
loader/process.py gives: each framework's dlopens after its import and the
file each got, its failed loads), findings out. What the model resolves is
checked against the real loader in tests/loader/test_tensorflow_gpu_init.py
and test_onnxruntime_provider.py; here, what the judge makes of it."""

from __future__ import annotations

from types import SimpleNamespace

from closure_audit.elf.dists import Distribution
from closure_audit.findings.collector import Findings
from closure_audit.findings.gpu_init import judge_gpu_init, judge_provider_loads, judge_triton_libcuda
from closure_audit.findings.policy import Policy
from closure_audit.loader.model import NOT_FOUND, RUNPATH
from closure_audit.loader.preloads.common import Preload
from closure_audit.loader.process import UNION, Process
from closure_audit.modes import NIX_STORE, TREE

SITE = "/v/lib/python3.12/site-packages"
FRAMEWORK = f"{SITE}/tensorflow/libtensorflow_framework.so.2"


def opened(name: str) -> Preload:
    return Preload("tensorflow", "tensorflow/python/... (dso_loader)", "import tensorflow", "tensorflow", None, name,
                   opener=FRAMEWORK)


def tensorflow(got: dict[str, str | None]) -> Process:
    return Process("tensorflow", ("tensorflow",), ("tensorflow",), opened=[(opened(n), p) for n, p in got.items()])


def union(frameworks, got: dict[str, str | None]) -> Process:
    return Process(UNION, (), tuple(frameworks), opened=[(opened(n), p) for n, p in got.items()])


def judged(processes, providers=None, inside=lambda p: p.startswith(SITE)) -> list:
    findings = Findings(Policy(), TREE, ("/v",))
    judge_gpu_init(processes, findings, providers or {}, inside)
    return findings.sorted()


def test_every_name_the_framework_cannot_open_in_one_finding():
    tf = tensorflow({"libcudart.so.12": f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12",
                     "libcusolver.so.11": None, "libcudnn.so.9": None})
    copy = f"{SITE}/nvidia/cusolver/lib/libcusolver.so.11"
    (f,) = judged([tf], {"libcusolver.so.11": [copy, "/usr/lib/libcusolver.so.11"]})
    assert (f.rule, f.severity, f.file) == ("gpu-init-library-missing", "warning", FRAMEWORK)
    assert f.fields["missing"] == ["libcusolver.so.11", "libcudnn.so.9"]
    assert f.fields["tree_copies"] == [copy] and f.fields["rescued_by"] is None  # the host's copy is not the tree's
    assert "runs on the CPU, without an error" in f.message and f"the tree holds {copy}" in f.message


def test_the_union_order_that_gives_it_its_gpu():
    """Imported after torch, whose preload mapped libcusolver.so.11, the
    name is answered; in the reverse order it is not."""
    tf = tensorflow({"libcusolver.so.11": None})
    first = union(("torch", "tensorflow"), {"libcusolver.so.11": f"{SITE}/nvidia/cusolver/lib/libcusolver.so.11"})
    first.reverse = union(("tensorflow", "torch"), {"libcusolver.so.11": None})
    (f,) = judged([tf, first])
    assert f.fields["rescued_by"] == ["torch", "tensorflow"]
    assert "imported as torch, then tensorflow, the libraries loaded before answer it" in f.message
    # Neither order answers it: no rescue is claimed.
    first.opened = [(opened("libcusolver.so.11"), None)]
    (f,) = judged([tf, first])
    assert f.fields["rescued_by"] is None


def test_a_framework_that_opens_everything_is_fine():
    assert judged([tensorflow({"libcudart.so.12": f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12"})]) == []


def provider_process(found: bool):
    """onnxruntime loads its CUDA provider by path; it needs libcublasLt.so.12 (found or not) and libc."""
    root = SimpleNamespace(real=f"{SITE}/onnxruntime/capi/libonnxruntime_providers_cuda.so",
                           elf=SimpleNamespace(runpath=None, rpath=None))
    needs = [SimpleNamespace(needed="libcublasLt.so.12", how=RUNPATH if found else NOT_FOUND),
             SimpleNamespace(needed="libc.so.6", how=NOT_FOUND)]  # glibc's own: never the provider's fault
    root.resolutions = needs
    chain = SimpleNamespace(root=root, objects=[root])
    preload = Preload("onnxruntime", "onnxruntime/capi/_pybind_state.py", "onnxruntime.preload_dlls()",
                      "onnxruntime", None, root.real)
    proc = Process("onnxruntime", ("onnxruntime",), ("onnxruntime",), preloaded={id(root): preload})
    if not found:
        proc.failed.append((chain, "libcublasLt.so.12", 3))
    return proc


def test_a_provider_whose_load_fails_and_the_install_no_extra_makes():
    ort = Distribution("onnxruntime-gpu", "1.23.2", f"{SITE}/onnxruntime_gpu-1.23.2.dist-info",
                       requires={"nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12"})
    findings = Findings(Policy(), TREE, ("/v",))
    judge_provider_loads([provider_process(False)], findings, {}, lambda p: p.startswith(SITE), [ort])
    (f,) = findings.sorted()
    assert f.fields["missing"] == ["libcublasLt.so.12"] and f.fields["framework"] == "onnxruntime"
    assert "it has no RUNPATH or RPATH" in f.message and "runs the session on the CPU" in f.message
    assert "onnxruntime-gpu 1.23.2 requires no distribution that installs libcublasLt.so.12" in f.message
    assert "nvidia-cublas" in f.message
    findings = Findings(Policy(), TREE, ("/v",))
    judge_provider_loads([provider_process(True)], findings, {}, lambda p: True, [ort])
    assert findings.sorted() == []


def test_triton_in_a_store_path_finds_libcuda_with_ldconfig():
    findings = Findings(Policy(), NIX_STORE)
    judge_triton_libcuda([("/nix/store/x-triton/lib/python3.12/site-packages/triton/backends/nvidia/driver.py",
                           "TRITON_LIBCUDA_PATH"),
                          ("/nix/store/y-triton/lib/python3.12/site-packages/triton/backends/nvidia/driver.py",
                           None)], ("/run/opengl-driver/lib",), findings)
    with_variable, without = sorted(findings.sorted(), key=lambda f: f.file)
    assert with_variable.fields["variable"] == "TRITON_LIBCUDA_PATH"
    assert "set TRITON_LIBCUDA_PATH=/run/opengl-driver/lib" in with_variable.message
    assert without.fields["variable"] is None and "only an ld.so.cache" in without.message
