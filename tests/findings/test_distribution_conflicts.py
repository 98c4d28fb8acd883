"""Files two installed distributions both claim (findings/dists.py), on
wheels built here and installed by pip itself, one over the other as a user
does: `pip install torch` (CUDA 13 cuDNN) then `tensorflow[and-cuda]`
(CUDA 12 cuDNN). pip writes the RECORDs and overwrites the files; the
finding must say whose bytes are on disk, as the file's SHA-256 shows."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import run_cli
from wheelfiles import make_wheel

LIB = "nvidia/cudnn/lib/libcudnn.so.9"
HEADER = "nvidia/cudnn/include/cudnn_version.h"
LICENSE = "nvidia/cudnn/LICENSE"


def wheel(directory: Path, name: str, version: str, files: dict[str, bytes], requires=()) -> Path:
    """A wheel pip installs: its files, METADATA, WHEEL and RECORD."""
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)).encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    members[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    return make_wheel(directory / f"{stem}-py3-none-any.whl", members)


def pip_install(prefix: Path, *wheels: Path) -> None:
    """pip's own install into `prefix`; what the running Python has installed
    (its own nvidia-cuda-runtime) is not taken for this prefix's."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-index", "--no-compile", "--ignore-installed", "--prefix", str(prefix), *map(str, wheels)], check=True,
                   capture_output=True)


def conflicts(tree: Path) -> list[dict]:
    p = run_cli("audit", "--json", str(tree))
    assert p.returncode in (0, 1), p.stderr
    return [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "distribution-file-conflict"]


def test_two_distributions_claiming_one_path_name_the_one_on_disk_and_who_loses(tmp_path, build):
    cu13 = build.lib("cu13/libcudnn.so.9", code="int cudnn_cu13 = 13;\n").read_bytes()
    cu12 = build.lib("cu12/libcudnn.so.9", code="int cudnn_cu12 = 12;\n").read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    w13 = wheel(wheels, "nvidia-cudnn-cu13", "9.28.1.4", {LIB: cu13, HEADER: b"#define CUDNN 13\n",
                                                          LICENSE: b"same\n"})
    w12 = wheel(wheels, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: cu12, HEADER: b"#define CUDNN 12\n",
                                                           LICENSE: b"same\n"})
    torch = wheel(wheels, "torch", "2.14.1", {"torch/__init__.py": b""},
                  requires=['nvidia-cudnn-cu13==9.24.0.29; platform_system == "Linux"'])
    tf = wheel(wheels, "tensorflow", "2.21.0", {"tensorflow/__init__.py": b""},
               requires=['nvidia-cudnn-cu12<10.0,>=9.3; extra == "and-cuda"'])
    venv = tmp_path / "venv"
    pip_install(venv, w13, torch)
    (site,) = venv.glob("lib/python*/site-packages")
    assert conflicts(venv) == []  # one claimant: nothing to say
    pip_install(venv, w12, tf)  # pip overwrites cu13's files without a word
    assert (site / LIB).read_bytes() == cu12
    (f,) = conflicts(venv)
    assert f["severity"] == "warning" and f["file"] == str(site / LIB)
    # The identical LICENSE is not reported; the two that differ are.
    assert f["paths"] == sorted([str(site / LIB), str(site / HEADER)])
    assert {d["name"] for d in f["distributions"]} == {"nvidia-cudnn-cu12", "nvidia-cudnn-cu13"}
    assert f["on_disk"] == "nvidia-cudnn-cu12"
    assert f["losers"] == [{"distribution": "nvidia-cudnn-cu13", "version": "9.28.1.4", "cuda_major": "13",
                            "required_by": ["torch"]}]
    assert "torch requires nvidia-cudnn-cu13 9.28.1.4 (CUDA 13) and gets nvidia-cudnn-cu12's build (CUDA 12)" in \
        f["message"]
    # Installed the other way round, the other one wins and TensorFlow loses.
    pip_install(venv, w13)
    (f,) = conflicts(venv)
    assert f["on_disk"] == "nvidia-cudnn-cu13" and f["losers"][0]["required_by"] == ["tensorflow"]
    # Bytes neither RECORD holds: said so, no winner.
    (site / LIB).write_bytes(cu13 + b"\0")
    (f,) = [f for f in conflicts(venv) if f["file"] == str(site / LIB)]
    assert f["on_disk"] is None and "match neither RECORD" in f["message"]


# -- advice checked against what is installed -----------------------------------

def maps(*paths, ld_library_path) -> list[str]:
    """What a fresh process maps after loading `paths` (RTLD_NOW), the host
    directory standing for ld.so.conf's."""
    code = ("import ctypes, os, sys\nfor p in sys.argv[1:]:\n    ctypes.CDLL(p, mode=os.RTLD_NOW)\n"
            "print('\\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps') if '.so' in l})))")
    env = dict(os.environ, LD_LIBRARY_PATH=str(ld_library_path))
    return subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True, env=env,
                          check=True).stdout.split()


def from_host(target: Path, host: Path, needed: str) -> dict:
    policy = target.parent / "policy.toml"
    policy.write_text(f'schema = "closure-audit-policy/1"\n[host]\ndirectories = {json.dumps([str(host), *LIBC])}\n')
    p = run_cli("audit", "--json", "--policy", str(policy), str(target))
    assert p.returncode in (0, 1), p.stderr
    (f,) = [f for f in json.loads(p.stdout)["findings"]
            if f["rule"] == "cuda-library-from-host" and f["needed"] == needed]
    return f


LIBC = [d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
        if os.path.exists(os.path.join(d, "libc.so.6"))]


def installed(tmp_path, build, needed: str, provider: tuple[str, str, str], user: tuple[str, str, str]):
    """A venv where pip installed `provider` (distribution, version, path of
    its library) and `user` (the same, for a library that needs `needed`,
    found only on the host): (venv, its site-packages, the host directory)."""
    host = tmp_path / "host"
    build.lib(f"../host/{needed}", code="int host_copy = 1;\n")
    provided = build.lib(f"wheel/{os.path.basename(provider[2])}").read_bytes()
    needing = build.lib(f"wheel/{os.path.basename(user[2])}", links=[host / needed], runpath=["$ORIGIN"]).read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    pip_install(venv, wheel(wheels, provider[0], provider[1], {provider[2]: provided}),
                wheel(wheels, user[0], user[1], {user[2]: needing}))
    (site,) = venv.glob("lib/python*/site-packages")
    return venv, site, host


def test_a_name_without_a_version_the_installed_wheel_lacks_is_no_reason_to_install_it(tmp_path, build):
    """CUPTI asks for `libcudart.so`; nvidia-cuda-runtime is installed and
    ships libcudart.so.13 only: the advice says so, never 'install
    nvidia-cuda-runtime'. The real loader takes the host's file."""
    venv, site, host = installed(tmp_path, build, "libcudart.so",
                                 ("nvidia-cuda-runtime", "13.0.96", "nvidia/cu13/lib/libcudart.so.13"),
                                 ("nvidia-cuda-cupti", "13.0.85", "nvidia/cu13/lib/libcupti.so.13"))
    f = from_host(venv, host, "libcudart.so")
    assert "nvidia-cuda-runtime 13.0.96 is installed and ships only libcudart.so.13" in f["message"]
    assert "ship the" not in f["message"] and "installing none helps" in f["message"]
    assert str(host / "libcudart.so") in maps(site / "nvidia/cu13/lib/libcupti.so.13", ld_library_path=host)


def test_an_installed_file_outside_the_audited_directory_is_named_where_it_is(tmp_path, build):
    """Auditing site-packages/nvidia/cu13/lib: a library there needs
    libnvvm.so.4, which nvidia-nvvm installs in nvidia/cu13/nvvm/lib64,
    outside that directory; the host has one too. The advice names the
    installed file and why the search misses it, not 'install nvidia-nvvm'."""
    _venv, site, host = installed(tmp_path, build, "libnvvm.so.4",
                                  ("nvidia-nvvm", "13.0.88", "nvidia/cu13/nvvm/lib64/libnvvm.so.4"),
                                  ("nvidia-nvvm-user", "13.0.1", "nvidia/cu13/lib/libnvvmuser.so.13"))
    f = from_host(site / "nvidia/cu13/lib", host, "libnvvm.so.4")
    installed_copy = site / "nvidia/cu13/nvvm/lib64/libnvvm.so.4"
    assert f"nvidia-nvvm 13.0.88 installs it, at {installed_copy}" in f["message"]
    assert "ship the" not in f["message"]
    mapped = maps(site / "nvidia/cu13/lib/libnvvmuser.so.13", ld_library_path=host)
    assert str(host / "libnvvm.so.4") in mapped and str(installed_copy) not in mapped


def test_unreadable_dist_infos_claim_nothing_and_never_crash(tmp_path, build):
    """RECORDs and METADATA of any shape: rows without a hash, a hash that
    is no base64, a size that is no number, binary bytes, a dist-info that
    is a file, one without RECORD. They claim what they can, and the audit
    reports no conflict it cannot tell."""
    site = tmp_path / "venv/lib/python3.12/site-packages"
    lib = build.lib("../venv/lib/python3.12/site-packages/pkg/libx.so")
    rows = {"a-1.dist-info": "pkg/libx.so,,\n\"unterminated,sha256=***,x\n",
            "b-2.dist-info": "pkg/libx.so,sha256=!!notbase64!!,12\n" + "\x00\xff" * 40,
            "c-3.dist-info": None}
    for name, record in rows.items():
        (site / name).mkdir(parents=True)
        (site / name / "METADATA").write_bytes(b"\xff\xfe\x00Name: \nRequires-Dist: \n")
        if record is not None:
            (site / name / "RECORD").write_text(record, errors="surrogateescape")
    (site / "d-4.dist-info").write_text("a file")
    p = run_cli("audit", "--json", str(tmp_path / "venv"))
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    assert not [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "distribution-file-conflict"]
    assert lib.exists()


def test_a_venvs_lib64_link_is_one_site_and_a_size_one_record_alone_gives_decides(tmp_path, build):
    """python -m venv links lib64 to lib: one finding, not one per name of
    the directory. The two builds differ in size, so the file's size names
    whose bytes they are; where sizes agree (the header) the SHA-256 does."""
    cu13 = build.lib("cu13/libcudnn.so.9", code="int cudnn_cu13[64] = {13};\n").read_bytes()
    cu12 = build.lib("cu12/libcudnn.so.9", code="int cudnn_cu12[4096] = {12};\n").read_bytes()
    assert len(cu13) != len(cu12)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    w13 = wheel(wheels, "nvidia-cudnn-cu13", "9.24.0.43", {LIB: cu13, HEADER: b"#define CUDNN 13\n"})
    w12 = wheel(wheels, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: cu12, HEADER: b"#define CUDNN 12\n"})
    venv = tmp_path / "venv"
    pip_install(venv, w13)
    pip_install(venv, w12)
    os.symlink("lib", venv / "lib64")
    (site,) = venv.glob("lib/python*/site-packages")
    (f,) = conflicts(venv)
    assert f["on_disk"] == "nvidia-cudnn-cu12" and sorted(f["paths"]) == sorted([str(site / LIB), str(site / HEADER)])
    # Bytes of neither, the size of neither: no one's.
    (site / LIB).write_bytes(cu12 + b"\0")
    (site / HEADER).write_bytes(b"#define CUDNN 99\n")
    (f,) = conflicts(venv)
    assert f["on_disk"] is None
