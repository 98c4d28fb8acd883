"""CuPy 13 on CUDA 12 (cupy-cuda12x 13.6): its cuDNN module needs
libcudnn.so.8, and no cuDNN 9 wheel answers that SONAME. The module fails
to import and only cupy.cudnn is lost: optional-library-missing, naming
the installed cuDNN 9 that does not help. The real loader loads the module
in a fresh process: it must fail on that name, with cuDNN 9 loaded first too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from audits import audit, host_policy, rules, venv

pytestmark = pytest.mark.fhs

EXT = ".cpython-312-x86_64-linux-gnu.so"


def test_cupy13_cudnn_module_needs_cudnn8_which_cudnn9_never_answers(build, tmp_path):
    site_rel, site = venv(build.root)
    cudnn9 = build.lib(f"{site_rel}/nvidia/cudnn/lib/libcudnn.so.9")
    cudnn8 = build.lib("elsewhere/libcudnn.so.8")  # what CuPy 13 was linked against, not in the tree
    module = build.lib(f"{site_rel}/cupy_backends/cuda/libs/cudnn{EXT}", soname="", links=[cudnn8])
    info = site / "nvidia_cudnn_cu12-9.28.0.42.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 9.28.0.42\n")
    (info / "RECORD").write_text("nvidia/cudnn/lib/libcudnn.so.9,,\n")
    report = audit(build.root / "venv", policy=host_policy(tmp_path))
    found = rules(report)
    assert "unresolved-library" not in found
    (f,) = [f for f in found["optional-library-missing"] if f.file == str(module)]
    assert (f.fields["needed"], f.fields["module"]) == ("libcudnn.so.8", "cupy_backends.cuda.libs.cudnn")
    assert "cuDNN 8" in f.message and "nvidia-cudnn-cu12 9.28.0.42 ships libcudnn.so.9" in f.message
    # The real loader: with cuDNN 9 loaded first, the module still fails, on libcudnn.so.8.
    code = ("import ctypes, os, sys\nctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)\n"
            "try:\n    ctypes.CDLL(sys.argv[2])\nexcept OSError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code, str(cudnn9), str(module)], capture_output=True, text=True,
                       check=True, env={"PATH": "/usr/bin:/bin"})
    assert "libcudnn.so.8" in p.stdout
