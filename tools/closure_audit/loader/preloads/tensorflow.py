"""TensorFlow (2.20, 2.21 with `[and-cuda]`): no Python preload, and no ELF
of the wheel needs a CUDA library. At GPU initialisation
(`MaybeTryDlopenGPULibraries`, tsl's dso_loader.cc) the framework library
`tensorflow/libtensorflow_framework.so.2` dlopens the CUDA runtime,
cuBLAS, cuBLASLt, cuFFT, cuSOLVER, cuSPARSE and cuDNN by name: its own
RUNPATH decides, and if one fails TensorFlow logs "Skipping registering
GPU devices" and runs on the CPU.

Read from the files: which of those libraries the framework library names
(each base name as a string of its bytes), and each one's SONAME from the
RECORD of the distributions TensorFlow's METADATA requires (nvidia-cusolver-cu12
installs libcusolver.so.11): the versions TensorFlow was built against.
A name no required distribution installs is not modelled.
"""

from __future__ import annotations

import mmap
import os
import re

from ...elf.dists import read_distributions
from .common import Listing, Preload, Preloads

FRAMEWORK_LIBRARY = "tensorflow/libtensorflow_framework.so.2"
# tsl/platform/default/dso_loader.cc, TryDlopenCUDALibraries (TensorFlow 2.20 and 2.21).
GPU_INIT = ("cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "cudnn")
TRIGGER = "TensorFlow's GPU initialisation"


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if "libtensorflow_framework.so.2" in (listing(os.path.join(s, "tensorflow"))
                                                                         or ())), None)
    if site is None:
        return
    opener = os.path.realpath(os.path.join(site, FRAMEWORK_LIBRARY))
    named = _named(opener)
    # TensorFlow's own dist-info, then only the RECORDs of what it requires.
    tf = next(iter(read_distributions(site, {"tensorflow", "tensorflow-cpu", "tf-nightly"})), None)
    wanted = {d.key: d for d in read_distributions(site, tf.requires)} if tf is not None else {}
    files = {os.path.basename(rel) for d in wanted.values() for rel in d.files}
    for base in GPU_INIT:
        if base not in named:
            continue
        soname = next((f for f in sorted(files) if re.fullmatch(rf"lib{re.escape(base)}\.so\.\d+", f)), None)
        if soname is None:
            continue
        out.preloads.append(Preload("tensorflow", f"{FRAMEWORK_LIBRARY} (tsl dso_loader, {base})", TRIGGER,
                                    "tensorflow", None, soname, opener=opener))


def _named(path: str) -> set[str]:
    """The GPU_INIT base names the file holds: as NUL-terminated strings
    (2.20), or only as bytes of its code (2.21 builds "cusolver" from an
    immediate operand, `movabs rax, "cusolver"`, and no string says it)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return {b for b in GPU_INIT if data.find(b.encode()) >= 0}
    except (OSError, ValueError):
        return set()
