"""Which store paths hold NVIDIA's CUDA redistributables, by store name
(which redistributable and wheel ship a CUDA library, by its file name, is
cuda/libraries.py's table).

nixpkgs names each one after its manifest entry (`libcublas-12.4.5.8-lib`);
this project's package sets put the release in front
(`cuda13.0-libcublas-13.1.0.3-lib`). The monolithic toolkits are listed too.
"""

from __future__ import annotations

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
    "tensorrt", "libnvshmem", "nvshmem", "libcudss",
})


def is_cuda_redist(store_name: str) -> bool:
    """`store_name` is the part of a store path after the hash."""
    family, pname = package_key(parse_name(store_name)[0])
    return family in ("", "cuda") and pname in REDIST_NAMES
