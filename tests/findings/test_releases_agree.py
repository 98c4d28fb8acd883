"""Releases that must agree (elf/releases.py reads them, findings/agree.py
judges): cuBLAS and the cuBLASLt it gets, libcudnn.so.9 and the sublibrary
it opens, nvJitLink and the runtime in one process, and a framework against
the cuDNN its process maps. Each tree is built with gcc; the real loader
loads it in a fresh process and /proc/self/maps says which file each name
got: the finding must name that file and its release."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from audits import audit, host_policy, rules, venv
from conftest import run_cli

pytestmark = pytest.mark.fhs

EXT = ".cpython-312-x86_64-linux-gnu.so"

MAPS = textwrap.dedent("""
    import ctypes, json, os, sys
    for p in sys.argv[1:]:
        lib = ctypes.CDLL(p, mode=os.RTLD_NOW)
        if hasattr(lib, "open_sub"):
            lib.open_sub.restype = ctypes.c_int
            assert lib.open_sub() == 1
    with open("/proc/self/maps") as f:
        print(json.dumps(sorted({l.split()[-1] for l in f if ".so" in l.split()[-1]})))
""")


def mapped(*paths) -> list[str]:
    """What the real loader maps after loading `paths` in order."""
    p = subprocess.run([sys.executable, "-c", MAPS, *map(str, paths)], capture_output=True, text=True, check=True,
                       env={"PATH": "/usr/bin:/bin"})
    return json.loads(p.stdout)


def versioned(build, rel: str, soname: str, **kw):
    """lib/<soname>.<release>, its SONAME link beside it (as a Nix output)."""
    lib = build.lib(rel, soname=soname, **kw)
    os.symlink(lib.name, lib.parent / soname)
    return lib.parent / soname


@pytest.mark.parametrize("lt_release", ["12.9.1.4", "12.8.4.1"])
def test_cublas_against_the_cublaslt_it_gets(build, tmp_path, lt_release):
    lt = versioned(build, f"b/lib/libcublasLt.so.{lt_release}", "libcublasLt.so.12", code="int lt = 1;\n")
    cublas = versioned(build, "a/lib/libcublas.so.12.8.4.1", "libcublas.so.12", links=[lt],
                       runpath=["$ORIGIN/../../b/lib"])
    report = audit(build.root, policy=host_policy(tmp_path))
    found = rules(report).get("library-releases-differ", [])
    real_lt = os.path.realpath(lt)
    assert real_lt in mapped(cublas)  # the real loader gives cuBLAS that cuBLASLt
    if lt_release == "12.8.4.1":
        assert found == []
        return
    (f,) = found
    assert (f.severity, f.file, f.fields["partner"]) == ("error", os.path.realpath(cublas), real_lt)
    assert (f.fields["version"], f.fields["partner_version"], f.fields["agree"]) == ("12.8.4.1", "12.9.1.4", "release")
    assert "12.8.4.1" in f.message and "12.9.1.4" in f.message


def record(site, dist: str, version: str, files: dict, requires=()) -> None:
    """A dist-info whose RECORD claims `files` (site-relative path -> bytes it installed)."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    rows = []
    for rel, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


OPENER = 'int open_sub(void) { return dlopen("libcudnn_ops.so.9", RTLD_NOW) != 0; }\n'


@pytest.fixture
def cudnn(build, tmp_path):
    """nvidia-cudnn-cu12 9.28 installed over nvidia-cudnn-cu13 9.24, which
    ones bytes on disk decided by the case; torch built for CUDA 13 with cuDNN 9.24."""
    def make(main_of: str, ops_of: str, pin: str = "9.24.0.5"):
        site = build.root / "venv/lib/python3.12/site-packages"
        (build.root / "venv/pyvenv.cfg").parent.mkdir(parents=True, exist_ok=True)
        (build.root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
        lib = "venv/lib/python3.12/site-packages/nvidia/cudnn/lib"
        made = {}
        for major in ("12", "13"):
            ops = build.lib(f"staging/cu{major}/libcudnn_ops.so.9", soname="libcudnn_ops.so.9",
                            code=f"int ops_cu{major} = 1;\n")
            main = build.lib(f"staging/cu{major}/libcudnn.so.9", soname="libcudnn.so.9", runpath=["$ORIGIN"],
                             code=f"#include <dlfcn.h>\nint cudnn_cu{major} = 1;\n" + OPENER)
            made[major] = {"nvidia/cudnn/lib/libcudnn.so.9": main.read_bytes(),
                           "nvidia/cudnn/lib/libcudnn_ops.so.9": ops.read_bytes()}
        target = build.path(f"{lib}/libcudnn.so.9").parent
        (target / "libcudnn.so.9").write_bytes(made[main_of]["nvidia/cudnn/lib/libcudnn.so.9"])
        (target / "libcudnn_ops.so.9").write_bytes(made[ops_of]["nvidia/cudnn/lib/libcudnn_ops.so.9"])
        os.chmod(target / "libcudnn.so.9", 0o755)
        record(site, "nvidia-cudnn-cu12", "9.28.0.42", made["12"])
        record(site, "nvidia-cudnn-cu13", "9.24.0.5", made["13"])
        record(site, "torch", "2.14.1", {}, requires=[f"nvidia-cudnn-cu13=={pin}; platform_system == 'Linux'"])
        (site / "torch").mkdir()
        (site / "torch/version.py").write_text("from typing import Optional\n__version__ = '2.14.1'\n"
                                               "cuda: Optional[str] = '13.0'\n")
        module = build.lib(f"venv/lib/python3.12/site-packages/torch/_C{EXT}", soname="",
                           links=[target / "libcudnn.so.9"], runpath=["$ORIGIN/../nvidia/cudnn/lib"])
        return build.root / "venv", target, module
    return make


def test_cudnn_sublibrary_of_another_release(cudnn, tmp_path):
    venv, target, module = cudnn(main_of="13", ops_of="12")
    report = audit(venv, policy=host_policy(tmp_path))
    found = rules(report)
    (f,) = found["library-releases-differ"]
    main, ops = str(target / "libcudnn.so.9"), str(target / "libcudnn_ops.so.9")
    assert (f.file, f.fields["partner"], f.fields["version"], f.fields["partner_version"]) == (
        main, ops, "9.24.0.5", "9.28.0.42")
    assert "nvidia-cudnn-cu12 9.28.0.42's RECORD" in f.message
    assert "framework-library-build-differs" not in found  # torch maps cu13's 9.24: what it was built with
    # The real loader: torch's module maps that libcudnn.so.9, whose dlopen gets that libcudnn_ops.so.9.
    assert {main, ops} <= set(mapped(target / "libcudnn.so.9", module))


def test_framework_gets_cudnn_built_for_another_cuda_major(cudnn, tmp_path):
    venv, target, module = cudnn(main_of="12", ops_of="12")
    report = audit(venv, policy=host_policy(tmp_path))
    found = rules(report)
    assert "library-releases-differ" not in found
    (f,) = found["framework-library-build-differs"]
    main = str(target / "libcudnn.so.9")
    assert (f.severity, f.file, f.fields["framework"], f.fields["library"], f.fields["process"]) == (
        "warning", main, "torch", "libcudnn", "torch")
    assert f.fields["found"] == {"version": "9.28.0.42", "cuda_major": "12",
                                 "source": "nvidia-cudnn-cu12 9.28.0.42's RECORD"}
    assert f.fields["built"]["cuda"] == "13.0" and "built for CUDA 12" in f.message
    assert "older" not in f.message
    assert main in mapped(module)


def test_framework_gets_cudnn_older_than_its_build(cudnn, tmp_path):
    venv, target, module = cudnn(main_of="13", ops_of="13", pin="9.30.0.1")
    (f,) = rules(audit(venv, policy=host_policy(tmp_path)))["framework-library-build-differs"]
    assert f.fields["built"]["version"] == "9.30.0.1" and f.fields["found"]["version"] == "9.24.0.5"
    assert "older than the 9.30.0.1 it was built against" in f.message and "CUDA 12" not in f.message
    assert str(target / "libcudnn.so.9") in mapped(module)


@pytest.mark.parametrize("both_runtimes", [False, True])
def test_nvjitlink_and_runtime_of_other_cuda_majors_in_one_process(build, tmp_path, both_runtimes):
    """nvJitLink 12 beside the CUDA 13 runtime only is a finding; beside CUDA
    12's runtime too (CUDA 12 and 13 stacks in one process), it is not."""
    site = "venv/lib/python3.12/site-packages"
    (build.root / "venv").mkdir(exist_ok=True)
    (build.root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    rt = versioned(build, f"{site}/rt/lib/libcudart.so.13.0.96", "libcudart.so.13", code="int rt = 1;\n")
    jit = versioned(build, f"{site}/jit/lib/libnvJitLink.so.12.9.86", "libnvJitLink.so.12", code="int jit = 1;\n")
    links, runpath = [rt, jit], ["$ORIGIN/../rt/lib", "$ORIGIN/../jit/lib"]
    if both_runtimes:
        links.append(versioned(build, f"{site}/rt12/lib/libcudart.so.12.9.79", "libcudart.so.12", code="int r = 1;\n"))
        runpath.append("$ORIGIN/../rt12/lib")
    module = build.lib(f"{site}/fw/_C{EXT}", soname="", links=links, runpath=runpath)
    found = rules(audit(build.root / "venv", policy=host_policy(tmp_path))).get("library-releases-differ", [])
    real = mapped(module)
    assert {os.path.realpath(p) for p in links} <= set(real)  # the real loader maps every one of them
    if both_runtimes:
        assert found == []
        return
    (f,) = found
    assert (f.file, f.fields["partner"], f.fields["agree"]) == (
        os.path.realpath(jit), os.path.realpath(rt), "CUDA major")
    assert "CUDA 12" in f.message and "CUDA 13" in f.message


def test_both_rules_in_the_json_contract(cudnn, tmp_path):
    """The command's --json (checked against the schema by run_cli) carries
    both findings with their fields; the error makes the exit status 1."""
    venv, target, _ = cudnn(main_of="13", ops_of="12", pin="9.30.0.1")
    policy = tmp_path / "policy.toml"
    policy.write_text('[host]\ndirectories = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]\n')
    p = run_cli("audit", "--json", "--policy", str(policy), str(venv))
    assert p.returncode == 1, p.stderr
    got = {f["rule"]: f for f in json.loads(p.stdout)["findings"]}
    assert got["library-releases-differ"]["partner"] == str(target / "libcudnn_ops.so.9")
    assert got["framework-library-build-differs"]["built"] == {
        "version": "9.30.0.1", "cuda": "13.0",
        "source": "torch 2.14.1's Requires-Dist nvidia-cudnn-cu13"}


@pytest.mark.parametrize("builtins_release", ["13.0.88", "13.0.48"])
def test_nvrtc_against_the_builtins_it_opens(build, tmp_path, builtins_release):
    builtins = build.lib(f"lib/libnvrtc-builtins.so.{builtins_release}", soname="libnvrtc-builtins.so.13.0",
                         code="int builtins = 1;\n")
    os.symlink(builtins.name, builtins.parent / "libnvrtc-builtins.so.13.0")
    opener = ('#include <dlfcn.h>\nint open_sub(void) { return dlopen("libnvrtc-builtins.so.13.0", RTLD_NOW) != 0; }\n')
    nvrtc = versioned(build, "lib/libnvrtc.so.13.0.88", "libnvrtc.so.13", code=opener, runpath=["$ORIGIN"])
    found = rules(audit(build.root, policy=host_policy(tmp_path))).get("library-releases-differ", [])
    assert str(builtins) in mapped(nvrtc)  # the real dlopen gets that file
    if builtins_release == "13.0.88":
        assert found == []
        return
    (f,) = found
    assert (f.file, f.fields["partner"], f.fields["version"], f.fields["partner_version"]) == (
        os.path.realpath(nvrtc), str(builtins), "13.0.88", "13.0.48")


def test_framework_against_the_nccl_it_maps(build, tmp_path):
    """torch built for CUDA 13 with NCCL 2.28.9 maps nvidia-nccl-cu12 2.27.7's
    libnccl.so.2 (installed over its own): older, and for CUDA 12."""
    site_rel, site = venv(build.root)
    nccl = build.lib(f"{site_rel}/nvidia/nccl/lib/libnccl.so.2", code="int nccl_cu12 = 1;\n")
    record(site, "nvidia-nccl-cu12", "2.27.7", {"nvidia/nccl/lib/libnccl.so.2": nccl.read_bytes()})
    record(site, "torch", "2.14.1", {}, requires=["nvidia-nccl-cu13==2.28.9; platform_system == 'Linux'"])
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text("cuda = '13.0'\n")
    module = build.lib(f"{site_rel}/torch/_C{EXT}", soname="", links=[nccl], runpath=["$ORIGIN/../nvidia/nccl/lib"])
    (f,) = rules(audit(build.root / "venv", policy=host_policy(tmp_path)))["framework-library-build-differs"]
    assert (f.file, f.fields["library"], f.fields["found"]["version"], f.fields["built"]["version"]) == (
        str(nccl), "libnccl", "2.27.7", "2.28.9")
    assert "older than the 2.28.9" in f.message and "built for CUDA 12" in f.message
    assert str(nccl) in mapped(module)


# tensorflow/python/platform/build_info.py as TensorFlow 2.21.0's wheel ships it:
# one collections.OrderedDict call over a literal list of pairs, not a dict literal.
BUILD_INFO = '''"""Auto-generated module providing information about the build."""
import collections

build_info = collections.OrderedDict([('cpu_compiler', 'clang'), ('cuda_compute_capabilities', ['sm_60', 'sm_70', \
'sm_80', 'sm_89', 'compute_90']), ('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True), \
('is_rocm_build', False), ('is_tensorrt_build', False)])
'''

TF_OPEN = ('#include <dlfcn.h>\n'
           'int open_sub(void) { return dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL) != 0; }\n')


def test_tensorflow_build_info_is_read_from_its_real_format(tmp_path):
    from closure_audit.elf.releases import read_builds

    site = tmp_path / "site-packages"
    (site / "tensorflow/python/platform").mkdir(parents=True)
    (site / "tensorflow/python/platform/build_info.py").write_text(BUILD_INFO)
    (build,) = read_builds([str(site)], []).values()
    assert (build.framework, build.cuda, build.cuda_source) == ("tensorflow", "12.5.1", "tensorflow build_info")
    assert build.minimums == {"libcudnn": ("9", "tensorflow build_info")}
    # A build_info that is no sequence of pairs is not read, never guessed at.
    (site / "tensorflow/python/platform/build_info.py").write_text(
        "import collections\nbuild_info = collections.OrderedDict(make())\n")
    assert read_builds([str(site)], []) == {}


@pytest.mark.parametrize("on_disk", ["12", "13"])
def test_tensorflow_against_the_cudnn_its_gpu_init_opens(build, tmp_path, on_disk):
    """TensorFlow built for CUDA 12.5.1 (build_info) whose GPU initialisation
    opens nvidia/cudnn/lib/libcudnn.so.9 through its framework library's
    RUNPATH: the CUDA 13 wheel's bytes there (nvidia-cudnn-cu13 installed
    over -cu12) are a finding naming both CUDA versions; the CUDA 12 bytes none.
    The real loader: that dlopen maps that file."""
    rel, site = venv(build.root)
    made = {}
    for major, version in (("12", "9.28.0.42"), ("13", "9.24.0.5")):
        lib = build.lib(f"staging/cu{major}/libcudnn.so.9", soname="libcudnn.so.9", code=f"int cudnn_cu{major};\n")
        made[major] = (version, lib.read_bytes())
    target = build.path(f"{rel}/nvidia/cudnn/lib/libcudnn.so.9")
    target.write_bytes(made[on_disk][1])
    os.chmod(target, 0o755)
    for major, (version, data) in made.items():
        record(site, f"nvidia-cudnn-cu{major}", version, {"nvidia/cudnn/lib/libcudnn.so.9": data})
    record(site, "tensorflow", "2.21.0", {}, requires=["nvidia-cudnn-cu12<10.0,>=9.3; extra == \"and-cuda\""])
    framework = build.lib(f"{rel}/tensorflow/libtensorflow_framework.so.2", soname="libtensorflow_framework.so.2",
                          runpath=["$ORIGIN/../nvidia/cudnn/lib"], code="const char *tsl = \"cudnn\";\n" + TF_OPEN)
    build.lib(f"{rel}/tensorflow/python/_pywrap_tensorflow_internal{EXT}", soname="", links=[framework],
              runpath=["$ORIGIN/../"])
    (site / "tensorflow/python/platform").mkdir(parents=True)
    (site / "tensorflow/python/platform/build_info.py").write_text(BUILD_INFO)
    assert str(target) in mapped(framework)  # its open_sub() dlopens libcudnn.so.9 through its RUNPATH
    found = [f for f in rules(audit(build.root / "venv", policy=host_policy(tmp_path))).get(
        "framework-library-build-differs", []) if f.fields["framework"] == "tensorflow"]
    if on_disk == "12":
        assert found == []
        return
    (f,) = found
    assert (f.file, f.fields["library"], f.fields["process"]) == (str(target), "libcudnn", "tensorflow")
    assert f.fields["found"] == {"version": "9.24.0.5", "cuda_major": "13",
                                 "source": "nvidia-cudnn-cu13 9.24.0.5's RECORD"}
    assert f.fields["built"]["cuda"] == "12.5.1"
    assert "built for CUDA 13, it for CUDA 12.5.1 (tensorflow build_info)" in f.message
