"""TensorFlow's GPU initialisation (loader/preloads/tensorflow.py): its
framework library dlopens the CUDA libraries by name through its own
RUNPATH once imported. TensorFlow 2.21's RUNPATH has no nvidia/cusolver/lib:
alone, libcusolver.so.11 fails and TensorFlow runs on the CPU; imported
after torch, whose preload mapped that file, it gets its GPU.

The framework library here is built with gcc to do what tsl's dso_loader
does: `gpu_init()` dlopens lib<name>.so.<version> for each name and returns
the ones that fail. The real loader runs it in a fresh process, after the
loads the model lists in its order, and both verdicts are compared with
the model's: the file each name gets, and which fail."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from audits import audit, host_policy
from test_process_model import EXT, TORCH_INIT, by_rule, stack, write  # noqa: F401
from test_union_process import processes, roots

pytestmark = pytest.mark.fhs

LIBS = {"cudart": ("cuda_runtime", "12"), "cublas": ("cublas", "12"), "cublasLt": ("cublas", "12"),
        "cufft": ("cufft", "11"), "cusolver": ("cusolver", "11"), "cusparse": ("cusparse", "12"),
        "cudnn": ("cudnn", "9")}
DISTS = {"cuda_runtime": "nvidia-cuda-runtime-cu12", "cublas": "nvidia-cublas-cu12", "cufft": "nvidia-cufft-cu12",
         "cusolver": "nvidia-cusolver-cu12", "cusparse": "nvidia-cusparse-cu12", "cudnn": "nvidia-cudnn-cu12"}

GPU_INIT = r'''
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
static const char *names[] = {"cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "cudnn"};
static const char *versions[] = {"12", "12", "12", "11", "11", "12", "9"};
static char failed[512];
const char *gpu_init(void) {
    char file[64];
    failed[0] = 0;
    for (int i = 0; i < 7; i++) {
        snprintf(file, sizeof file, "lib%s.so.%s", names[i], versions[i]);
        if (!dlopen(file, RTLD_NOW | RTLD_LOCAL)) { strcat(failed, file); strcat(failed, " "); }
    }
    return failed;
}
'''

RUN = textwrap.dedent("""
    import ctypes, json, os, sys
    for p in sys.argv[2:]:
        try:
            ctypes.CDLL(p, mode=os.RTLD_NOW)
        except OSError:
            pass
    init = ctypes.CDLL(sys.argv[1]).gpu_init
    init.restype = ctypes.c_char_p
    failed = init().decode().split()
    with open("/proc/self/maps") as f:
        mapped = sorted({l.split()[-1] for l in f if ".so" in l.split()[-1]})
    print(json.dumps([failed, mapped]))
""")


@pytest.fixture
def tf(stack, build):
    """TensorFlow 2.21's shape beside the stack's torch, which also preloads cuSOLVER."""
    site = stack.site
    files = {}
    for name, (folder, version) in LIBS.items():
        files[name] = build.lib(f"venv/lib/python3.12/site-packages/nvidia/{folder}/lib/lib{name}.so.{version}",
                                code=f"int {name}_cu12 = 1;\n")
    for folder, dist in DISTS.items():
        info = site / f"{dist.replace('-', '_')}-12.9.0.dist-info"
        listed = [f"nvidia/{folder}/lib/{p.name},," for n, p in files.items() if LIBS[n][0] == folder]
        write(info / "METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 12.9.0\n")
        write(info / "RECORD", "\n".join(listed) + "\n")
    write(site / "tensorflow-2.21.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.21.0\n"
          + "".join(f'Requires-Dist: {d}; extra == "and-cuda"\n' for d in DISTS.values()))
    write(site / "tensorflow-2.21.0.dist-info/RECORD", "tensorflow/libtensorflow_framework.so.2,,\n")
    framework = build.path("venv/lib/python3.12/site-packages/tensorflow/libtensorflow_framework.so.2")
    src = build.path("gpu_init.c")
    src.write_text(GPU_INIT)
    runpath = ":".join(f"$ORIGIN/../nvidia/{f}/lib" for f in ("cuda_runtime", "cublas", "cufft", "cusparse", "cudnn"))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(framework), str(src), "-Wl,-soname,libtensorflow_framework.so.2",
                    f"-Wl,--enable-new-dtags,-rpath,{runpath}"], check=True)
    module = build.lib(f"venv/lib/python3.12/site-packages/tensorflow/python/_pywrap_tensorflow_internal{EXT}",
                       soname="", links=[framework], runpath=["$ORIGIN/.."])
    # torch's list with cuSOLVER, as torch 2.14.1's has.
    write(site / "torch/__init__.py", (TORCH_INIT % "required=False").replace(
        '("cufft", "libcufft.so.*[0-9]"),', '("cufft", "libcufft.so.*[0-9]"),\n        ("cusolver", "libcusolver.so.*[0-9]"),'))
    stack.tf_framework, stack.tf_module, stack.tf_files = framework, module, files
    return stack


def real(stack, proc: dict) -> tuple[list[str], list[str]]:
    """What gpu_init() fails to open, and what the process maps, after the
    real loader loaded `proc`'s roots in its order, but for what the model
    says gpu_init() opens: the real dlopen by name must find those itself."""
    opened = {o["path"] for o in proc["objects"] if o["loaded_by"].get("preload") == "tensorflow"}
    paths = [p for p in roots(proc) if p not in opened]
    p = subprocess.run([sys.executable, "-c", RUN, str(stack.tf_framework), *paths], capture_output=True, text=True,
                       check=True, env={"LD_LIBRARY_PATH": str(stack.host), "PATH": "/usr/bin:/bin"})
    return json.loads(p.stdout)


def test_tensorflow_alone_runs_on_the_cpu_and_after_torch_gets_its_gpu(tf, tmp_path):
    report = audit(tf.venv, policy=host_policy(tf.host))
    (f,) = by_rule(report, "gpu-init-library-missing")
    cusolver = str(tf.tf_files["cusolver"])
    assert (f.severity, f.file, f.fields["framework"], f.fields["missing"]) == (
        "warning", str(tf.tf_framework), "tensorflow", ["libcusolver.so.11"])
    assert f.fields["tree_copies"] == [cusolver] and f.fields["rescued_by"] == ["torch", "cupy", "tensorflow"]
    assert "runs on the CPU" in f.message and "imported as torch, then cupy, then tensorflow" in f.message
    (o,) = [x for x in by_rule(report, "import-order-differs") if x.fields["library"] == "libcusolver.so.11"]
    assert o.severity == "warning" and o.fields["objects"] == [
        {"file": str(tf.tf_framework), "first": cusolver, "second": None}]
    procs = processes(tf, tmp_path)
    assert procs["tensorflow"]["loads_cuda"] and procs["union"]["frameworks"] == ["torch", "cupy", "tensorflow"]
    opened = {o["path"] for o in procs["tensorflow"]["objects"] if o["loaded_by"].get("preload") == "tensorflow"}
    assert opened == {str(lib) for name, lib in tf.tf_files.items() if name != "cusolver"}
    # The real loader: alone, cuSOLVER fails and nothing else does; after torch, none fails.
    failed, mapped = real(tf, procs["tensorflow"])
    assert failed == ["libcusolver.so.11"] and cusolver not in mapped
    for name, lib in tf.tf_files.items():
        assert (str(lib) in mapped) == (name != "cusolver")
    failed, mapped = real(tf, procs["union"])
    assert failed == [] and cusolver in mapped


def _immediate(name: str) -> str:
    """A name as a 64-bit integer constant: its bytes only in the code."""
    return hex(int.from_bytes(name.encode().ljust(8, b"\0"), "little")) + "ULL"


# TensorFlow 2.21's shape: the names are immediate operands of its code
# (movabs rax, "cusolver"); no NUL-terminated string holds one.
GPU_INIT_IMMEDIATE = r'''
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
static char failed[512];
static void try_open(unsigned long long name, const char *version) {
    char base[9] = {0}, file[64];
    memcpy(base, &name, 8);
    snprintf(file, sizeof file, "lib%s.so.%s", base, version);
    if (!dlopen(file, RTLD_NOW | RTLD_LOCAL)) { strcat(failed, file); strcat(failed, " "); }
}
const char *gpu_init(void) {
    failed[0] = 0;
''' + "".join(f'    try_open({_immediate(n)}, "{v}");\n' for n, v in (
    ("cudart", "12"), ("cublas", "12"), ("cublasLt", "12"), ("cufft", "11"), ("cusolver", "11"), ("cusparse", "12"),
    ("cudnn", "9"))) + '''    return failed;
}
'''


def test_names_only_the_code_holds_are_read_as_tensorflow_2_21s(tf, tmp_path):
    """The framework library of 2.21 names its libraries in no string: the
    model reads them all the same, and the real loader agrees: alone,
    cuSOLVER fails and the others load; after torch, none fails."""
    src = tmp_path / "gpu_init_immediate.c"
    src.write_text(GPU_INIT_IMMEDIATE)
    runpath = ":".join(f"$ORIGIN/../nvidia/{f}/lib" for f in ("cuda_runtime", "cublas", "cufft", "cusparse", "cudnn"))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tf.tf_framework), str(src),
                    "-Wl,-soname,libtensorflow_framework.so.2", f"-Wl,--enable-new-dtags,-rpath,{runpath}"], check=True)
    data = tf.tf_framework.read_bytes()
    assert b"\0cusolver\0" not in data and b"\0cudart\0" not in data and b"cusolver" in data
    report = audit(tf.venv, policy=host_policy(tf.host))
    (f,) = by_rule(report, "gpu-init-library-missing")
    assert f.fields["missing"] == ["libcusolver.so.11"]
    procs = processes(tf, tmp_path)
    opened = {o["path"] for o in procs["tensorflow"]["objects"] if o["loaded_by"].get("preload") == "tensorflow"}
    assert opened == {str(lib) for name, lib in tf.tf_files.items() if name != "cusolver"}
    failed, mapped = real(tf, procs["tensorflow"])
    assert failed == ["libcusolver.so.11"]
    failed, mapped = real(tf, procs["union"])
    assert failed == [] and str(tf.tf_files["cusolver"]) in mapped
