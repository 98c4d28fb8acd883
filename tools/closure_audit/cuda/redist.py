"""Which store paths hold NVIDIA's CUDA redistributables, by store name, and
which redistributable and wheel ship a CUDA library, by its file name.

nixpkgs names each one after its manifest entry (`libcublas-12.4.5.8-lib`);
this project's package sets put the release in front
(`cuda13.0-libcublas-13.1.0.3-lib`). The monolithic toolkits are listed too.
"""

from __future__ import annotations

import fnmatch
import re

from ..nix.storepath import package_key, parse_name

# The entries of NVIDIA's CUDA and cuDNN manifests (pkgs/cuda/manifests; a
# test keeps the two in step), and the other NVIDIA libraries nixpkgs'
# CUDA package set carries under their own names.
REDIST_NAMES = frozenset({
    "collectx_bringup", "cuda_cccl", "cuda_compat", "cuda_crt", "cuda_ctadvisor", "cuda_cudart", "cuda_culibos",
    "cuda_cuobjdump", "cuda_cupti", "cuda_cuxxfilt", "cuda_demo_suite", "cuda_documentation", "cuda_gdb",
    "cuda_nsight", "cuda_nvcc", "cuda_nvdisasm", "cuda_nvml_dev", "cuda_nvprof", "cuda_nvprune", "cuda_nvrtc",
    "cuda_nvtx", "cuda_nvvp", "cuda_opencl", "cuda_profiler_api", "cuda_sandbox_dev", "cuda_sanitizer_api",
    "cudnn", "cudnn_jit", "cudnn_samples", "driver_assistant", "fabricmanager", "imex", "libcublas", "libcudla",
    "libcufft", "libcufile", "libcurand", "libcusolver", "libcusparse", "libnpp", "libnvfatbin",
    "libnvidia_nscq", "libnvjitlink", "libnvjpeg", "libnvptxcompiler", "libnvsdm", "libnvvm", "mft",
    "mft_autocomplete", "mft_oem", "nsight_compute", "nsight_systems", "nsight_vse", "nvidia_driver",
    "nvidia_fs", "nvlsm", "visual_studio_integration",
    # nixpkgs' CUDA package set beyond the manifests above
    "cudatoolkit", "cuda-merged", "nccl", "cutensor", "libcutensor", "cusparselt", "libcusparse_lt",
    "tensorrt", "libnvshmem", "nvshmem",
})


def is_cuda_redist(store_name: str) -> bool:
    """`store_name` is the part of a store path after the hash."""
    family, pname = package_key(parse_name(store_name)[0])
    return family in ("", "cuda") and pname in REDIST_NAMES


# What ships each CUDA library: (file name patterns, the redistributable, the
# pip wheel). CUDA 13's toolkit wheels carry no suffix and CUDA 12's end in
# -cu12; a wheel named with -cuXX has the CUDA major in every release.
LIBRARY_PACKAGES = (
    (("libcudart.so*",), "cuda_cudart", "nvidia-cuda-runtime"),
    (("libnvrtc.so*", "libnvrtc-builtins*.so*", "libnvrtc.alt.so*"), "cuda_nvrtc", "nvidia-cuda-nvrtc"),
    (("libnvJitLink.so*",), "libnvjitlink", "nvidia-nvjitlink"),
    (("libnvfatbin.so*",), "libnvfatbin", "nvidia-nvfatbin"),
    (("libnvvm.so*",), "libnvvm", "nvidia-nvvm"),
    (("libcublas.so*", "libcublasLt.so*", "libnvblas.so*"), "libcublas", "nvidia-cublas"),
    (("libcufft.so*", "libcufftw.so*"), "libcufft", "nvidia-cufft"),
    (("libcurand.so*",), "libcurand", "nvidia-curand"),
    (("libcusparseLt.so*",), "libcusparse_lt", "nvidia-cusparselt-cuXX"),
    (("libcusparse.so*",), "libcusparse", "nvidia-cusparse"),
    (("libcusolver.so*", "libcusolverMg.so*"), "libcusolver", "nvidia-cusolver"),
    (("libcudnn*.so*",), "cudnn", "nvidia-cudnn-cuXX"),
    (("libnccl.so*",), "nccl", "nvidia-nccl-cuXX"),
    (("libnvshmem*.so*", "nvshmem_*.so*"), "libnvshmem", "nvidia-nvshmem-cuXX"),
    (("libcupti.so*", "libnvperf_host.so*", "libnvperf_target.so*"), "cuda_cupti", "nvidia-cuda-cupti"),
    (("libcufile.so*", "libcufile_rdma.so*"), "libcufile", "nvidia-cufile"),
    (("libnpp*.so*",), "libnpp", "nvidia-npp"),
    (("libnvjpeg.so*",), "libnvjpeg", "nvidia-nvjpeg"),
    (("libnvToolsExt.so*", "libnvtx3interop.so*"), "cuda_nvtx", "nvidia-nvtx"),
    (("libcutensor*.so*",), "libcutensor", "cutensor-cuXX"),
)


def library_package(name: str) -> tuple[str, str] | None:
    """(redistributable, wheel) that ship the library `name`, or None."""
    return next(((redist, wheel) for patterns, redist, wheel in LIBRARY_PACKAGES
                 if any(fnmatch.fnmatchcase(name, p) for p in patterns)), None)


def install_hint(name: str) -> str:
    """What to install for the library `name`, in words."""
    found = library_package(name)
    if found is None:
        return "the NVIDIA wheel or redistributable that holds it"
    redist, wheel = found
    suffix = "XX: the CUDA major" if wheel.endswith("-cuXX") else f"{wheel}-cu12 for CUDA 12"
    return f"the {wheel} wheel ({suffix}) or the {redist} redistributable"


# Libraries whose SONAME's major version is the CUDA release's (cuFFT,
# cuRAND, cuSOLVER, cuSPARSE, cuDNN and NCCL number theirs on their own).
RELEASE_NUMBERED = ("libcudart", "libcublas", "libcublasLt", "libnvblas", "libnvrtc", "libnvJitLink", "libcupti")


def wheel_for(soname: str) -> str | None:
    """The pip requirement that provides a library of RELEASE_NUMBERED:
    `libcudart.so.13` -> `nvidia-cuda-runtime==13.*`, `libcudart.so.12` ->
    `nvidia-cuda-runtime-cu12`."""
    m = re.fullmatch(r"(lib\w+)\.so\.(\d+)", soname)
    found = library_package(soname) if m and m[1] in RELEASE_NUMBERED else None
    if found is None:
        return None
    wheel, major = found[1], int(m[2])
    return f"{wheel}=={major}.*" if major >= 13 else f"{wheel}-cu{major}"
