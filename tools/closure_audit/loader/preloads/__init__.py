"""Libraries a Python framework loads by absolute path before the extension
modules that need them, read from the tree's own Python files with `ast`
(nothing is imported): docs/internals/loader.md#preloads. One module per
framework, each with `read(sites, listing, out)`: a framework is added by
adding its module to FRAMEWORKS (and its test).

- PyTorch: `_preload_cuda_deps` in torch/__init__.py, at `import torch`;
- NVIDIA's cuda-pathfinder, for CuPy 14's triggers (`import cupy`,
  `cupy.cuda.cufft`, the `_submodules` of cupy_backends/cuda/libs); its
  catalog's format follows its version;
- JAX's CUDA plugin: `_load_nvidia_libraries` in
  jax_plugins/xla_cuda*/__init__.py, at the plugin's initialization;
- NVIDIA's cuda-bindings: its _internal wrappers' first call, through
  cuda-pathfinder (NVRTC and its builtins, nvJitLink, ...);
- TensorFlow: what its framework library dlopens by name at GPU initialisation;
- Triton's profiler: the CUPTI directory of its knob (bundled under
  triton/backends/nvidia/lib/cupti), and the tools its compiler runs;
- ONNX Runtime GPU: what onnxruntime.preload_dlls() loads by path, then its
  CUDA provider library, loaded by path for a CUDA session;
- numba-cuda: NVVM and NVRTC through cuda-pathfinder at its first compile
  (cuda-pathfinder's host fallbacks where the wheels hold neither: they and
  cuda-bindings' use Pathfinder.plan).

A file whose shape is not the one read here gives no preloads and a note
saying so: the audit then judges as without that framework's help.
"""

from __future__ import annotations

from . import cuda_bindings, cupy, jax, numba_cuda, onnxruntime, tensorflow, torch, triton
from .common import Listing, Preload, Preloads, site_dirs
from .pathfinder import Descriptor, Pathfinder

__all__ = ["Descriptor", "Listing", "Pathfinder", "Preload", "Preloads", "read_preloads", "site_dirs"]

# In this order: a framework's preloads are listed after the earlier ones'.
FRAMEWORKS = (torch, cupy, cuda_bindings, jax, tensorflow, triton, onnxruntime, numba_cuda)


def read_preloads(roots: tuple[str, ...], listing: Listing) -> Preloads:
    """Every preload the trees' Python files describe."""
    sites = site_dirs(roots)
    out = Preloads([], [])
    for framework in FRAMEWORKS:
        framework.read(sites, listing, out)
    return out
