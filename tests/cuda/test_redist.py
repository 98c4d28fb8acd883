"""cuda/redist.py on its own: which store names are NVIDIA's CUDA
redistributables, in nixpkgs' naming and in this project's (the release in
front), and what is not."""

from __future__ import annotations

import pytest

from closure_audit.cuda.redist import is_cuda_redist


@pytest.mark.parametrize("name", [
    "libcublas-12.4.5.8-lib", "cuda13.0-libcublas-13.1.0.3-lib", "cuda_cudart-12.9.79", "cudnn-9.27.0.1-lib",
    "cuda13.0-cuda_nvcc-13.0.88-bin", "nccl-2.27.7-1", "cudatoolkit-12.4.1", "cuda12.9-libnvjitlink-12.9.86",
])
def test_redistributables_by_their_store_names(name):
    assert is_cuda_redist(name)


@pytest.mark.parametrize("name", [
    "python3.12-torch-2.9.1", "glibc-2.40-66", "python3.12-nvidia-cublas-13.1.0.3", "magma-2.9.0",
    "libcublasish-1.0", "zlib-1.3.1",
])
def test_other_packages_are_not(name):
    assert not is_cuda_redist(name)
