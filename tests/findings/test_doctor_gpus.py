"""findings/doctor/gpus.py on its own: the host's GPUs, and on each whether
the target's GPU code runs: code objects written here (test_gpu.fat_file),
the host and target as records."""

from __future__ import annotations

from closure_audit.cuda.release import Need
from closure_audit.findings.doctor.gpus import gpu_code, gpus
from closure_audit.host.probe import Gpu
from doctorrecords import findings_of, host, page, store, tree
from test_gpu import cubin, fat_file, ptx


def devices_of(h):
    p = page(h)
    return p, gpus(p)


def test_the_hosts_gpus_and_what_tells_their_capability():
    h = host(gpus=("8.6", "9.0"))
    h.gpus.append(Gpu("NVIDIA Mystery", None, "/proc/driver/nvidia/gpus/0000:03:00.0/information"))
    h.gpus.append(Gpu("NVIDIA A10", "8.6", "nvidia-smi", model_capability="8.0", model_source="/proc/x", model="A10"))
    p, devices = devices_of(h)
    assert [d for _label, d in devices] == [(8, 6), (9, 0), (8, 6)]
    assert [c.rule for c in p.checks] == [None, None, "gpu-capability-unknown", "gpu-capability-mismatch"]
    assert "nvidia-smi's 8.6 is used" in p.checks[3].message


def test_no_gpu_and_why():
    h = host(gpus=())
    h.smi_error = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    p, devices = devices_of(h)
    assert devices == [] and p.checks[0].rule == "gpu-not-found" and "nvidia-smi failed" in p.checks[0].message
    gpu_code(p, tree(), devices)
    assert len(p.checks) == 1  # nothing to judge the code on


def test_a_gpu_without_a_cubin_or_ptx_for_it_gets_no_kernel_image(tmp_path):
    code = fat_file(tmp_path, [("sm_80", cubin(tmp_path, ["k"])), ("sm_90", cubin(tmp_path, ["k"]))])
    p, devices = devices_of(host(gpus=("7.5", "8.6", "9.0")))
    gpu_code(p, tree(gpu_code={code.path: code.kernels}), devices)
    lines = [c for c in p.checks if c.check == "gpu-code"]
    assert [c.status for c in lines] == ["error", "ok", "ok"]
    f = findings_of(p)["no-kernel-image"]
    assert (f.fields["capability"], f.fields["files"]) == ("7.5", [code.path])
    assert "has sm_80, sm_90" in f.message and "TORCH_CUDA_ARCH_LIST=\"7.5\"" in f.fields["fixes"][0]["text"]


def test_ptx_alone_is_a_slow_first_start_and_a_gpu_no_longer_built_for_is_told(tmp_path):
    code = fat_file(tmp_path, [("sm_90", cubin(tmp_path, ["k"])), ("compute_90", ptx(["k"]))])
    p, devices = devices_of(host(gpus=("10.0",)))
    gpu_code(p, store(gpu_code={code.path: code.kernels}), devices)
    f = findings_of(p)["jit-only-gpu-arch"]
    assert f.fields["ptx"] == "compute_90" and f.fields["fixes"][0]["text"].startswith("rebuild with cudaCapabilities")
    # CUDA 13 builds no more for 7.0: the fix is an older CUDA.
    p, devices = devices_of(host(gpus=("7.0",)))
    cuda13 = [Need((13, 0), True, "DT_NEEDED libcudart.so.13.0.96", "/venv/libcudart.so.13.0.96")]
    gpu_code(p, tree(cuda13, gpu_code={code.path: code.kernels}), devices)
    fix = findings_of(p)["no-kernel-image"].fields["fixes"][0]["text"]
    assert fix.startswith("CUDA 13.0 no longer builds for 7.0 (the last that does is CUDA 12.")


def test_code_that_defines_no_kernel_is_counted_apart(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_kernels = fat_file(tmp_path / "a", [("sm_86", cubin(tmp_path, ["k"]))])
    idle = fat_file(tmp_path / "b", [("sm_70", cubin(tmp_path, []))])
    p, devices = devices_of(host(gpus=("8.6",)))
    gpu_code(p, tree(gpu_code={with_kernels.path: with_kernels.kernels, idle.path: idle.kernels}), devices)
    assert p.checks[-1].status == "ok"
    assert p.checks[-1].message.endswith("every one of 1 files with GPU kernels has a cubin for it (1 more hold GPU "
                                         "code that defines no kernel)")
    p, devices = devices_of(host())
    gpu_code(p, tree(), devices)
    assert p.checks[-1].message == "the target holds no GPU code"
