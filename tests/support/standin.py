"""Stand-in driver libraries for machines without a GPU: libcuda.so.1
and libnvidia-ml.so.1, built with gcc, that report one device of
capability 9.0 and a CUDA 13.0 driver, so a framework that opens its CUDA
libraries only once it sees a device (TensorFlow's GPU initialisation,
JAX's plugin) tries to. Every other call fails: nothing runs on it."""

from __future__ import annotations

import os
import subprocess

STANDIN_CUDA = r"""
#include <stdio.h>
#include <string.h>
#include <stddef.h>
/* One device of capability 9.0, a 13.0 driver; everything else fails. */
int cuInit(unsigned f) { return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int i) { *d = 0; return i == 0 ? 0 : 101; }
int cuDeviceGetName(char *s, int n, int d) { snprintf(s, n, "stand-in"); return 0; }
int cuDeviceComputeCapability(int *ma, int *mi, int d) { *ma = 9; *mi = 0; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { *v = a == 75 ? 9 : a == 76 ? 0 : 1; return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)16 << 30; return 0; }
int cuDeviceTotalMem(size_t *b, int d) { *b = (size_t)16 << 30; return 0; }
int cuDeviceGetPCIBusId(char *s, int n, int d) { snprintf(s, n, "0000:00:00.0"); return 0; }
int cuGetErrorString(int e, const char **s) { *s = "stand-in driver"; return 0; }
int cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_STAND_IN"; return 0; }
"""
STANDIN_NVML = r"""
#include <stdio.h>
int nvmlInit(void) { return 0; }
int nvmlInit_v2(void) { return 0; }
int nvmlInitWithFlags(unsigned f) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 1; return 0; }
int nvmlDeviceGetCount(unsigned *n) { *n = 1; return 0; }
int nvmlSystemGetDriverVersion(char *s, unsigned n) { snprintf(s, n, "580.00"); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
"""


def standin(directory: str) -> str:
    """Build the stand-in driver libraries into directory; return it."""
    os.makedirs(directory, exist_ok=True)
    for soname, code in (("libcuda.so.1", STANDIN_CUDA), ("libnvidia-ml.so.1", STANDIN_NVML)):
        src = os.path.join(directory, soname + ".c")
        with open(src, "w") as f:
            f.write(code)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(directory, soname), src,
                        f"-Wl,-soname,{soname}"], check=True)
        os.unlink(src)
    return os.path.realpath(directory)
