"""Files two installed distributions both claim (findings/dists.py), on
wheels built here and installed by pip itself, one over the other as a user
does: `pip install torch` (CUDA 13 cuDNN) then `tensorflow[and-cuda]`
(CUDA 12 cuDNN). pip writes the RECORDs and overwrites the files; the
finding must say whose bytes are on disk, as the file's SHA-256 shows."""

from __future__ import annotations

import base64
import hashlib
import json
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
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-index", "--no-compile", "--prefix", str(prefix), *map(str, wheels)], check=True,
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
