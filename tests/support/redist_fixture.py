"""Redist-layout archives for tests: NVIDIA's layout, made of gcc-built files.

`make_tree` lays out a package the way NVIDIA's redist tarballs do (one top
directory `<name>-linux-x86_64-<version>-archive/` holding lib/, include/,
bin/, ...), with every kind of member the split rules distinguish. `pack`
writes it as a .tar.xz, `wheel` as an NVIDIA-style wheel.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

# path in the package -> the output the rules put it in (None: stays in out)
EXPECTED = {
    "lib/libdemo.so.13": "lib",
    "lib/libdemo.so": "lib",  # a symlink
    "lib/libdemo_static.a": "static",
    "lib/stubs/libcuda.so": "stubs",
    "lib/pkgconfig/demo.pc": "dev",
    "lib/cmake/demo/demo-config.cmake": "dev",
    "include/demo.h": "dev",
    "include/demo/detail.cuh": "dev",
    "bin/demo-tool": "bin",
    "bin/README": None,  # not executable
    "doc/manual.txt": "doc",
    "share/man/man1/demo-tool.1": "doc",
    "samples/hello/hello.cu": "samples",
    "samples/hello/hello.h": "samples",
    "LICENSE": None,
    "nvvm/libdevice/libdevice.10.bc": None,
}


def make_tree(root: Path, objects: dict[str, Path], name: str = "libdemo", version: str = "13.0.1") -> Path:
    top = root / f"{name}-linux-x86_64-{version}-archive"
    for rel in EXPECTED:
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
    so = top / "lib/libdemo.so.13"
    subprocess.run(["gcc", "-shared", "-o", str(so), str(objects["empty"]), "-Wl,-soname,libdemo.so.13"], check=True)
    os.symlink("libdemo.so.13", top / "lib/libdemo.so")
    subprocess.run(["ar", "rcs", str(top / "lib/libdemo_static.a"), str(objects["empty"])], check=True)
    subprocess.run(["gcc", "-shared", "-o", str(top / "lib/stubs/libcuda.so"), str(objects["empty"]),
                    "-Wl,-soname,libcuda.so.1"], check=True)
    subprocess.run(["gcc", "-o", str(top / "bin/demo-tool"), str(objects["main"])], check=True)
    texts = {
        "lib/pkgconfig/demo.pc": "prefix=${pcfiledir}/../..\nName: demo\n",
        "lib/cmake/demo/demo-config.cmake": "set(DEMO_FOUND TRUE)\n",
        "include/demo.h": "int demo(void);\n",
        "include/demo/detail.cuh": "#pragma once\n",
        "bin/README": "tools\n",
        "doc/manual.txt": "manual\n",
        "share/man/man1/demo-tool.1": ".TH demo-tool 1\n",
        "samples/hello/hello.cu": "__global__ void k() {}\n",
        "samples/hello/hello.h": "#pragma once\n",
        "LICENSE": "NVIDIA Software License Agreement\n",
        "nvvm/libdevice/libdevice.10.bc": "BC",
    }
    for rel, text in texts.items():
        (top / rel).write_text(text)
    return top


def pack(top: Path, dest: Path) -> Path:
    archive = dest / f"{top.name}.tar.xz"
    with tarfile.open(archive, "w:xz") as tf:
        tf.add(top, arcname=top.name)
    return archive


def wheel(top: Path, dest: Path, dist: str = "nvidia_demo", version: str = "13.0.1") -> Path:
    """The same files as an NVIDIA wheel lays them out (nvidia/cu13/...):
    symlinks become copies, as a wheel cannot hold them."""
    path = dest / f"{dist}-{version}-py3-none-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(top.rglob("*")):
            if file.is_dir():
                continue
            info = zipfile.ZipInfo(f"nvidia/cu13/{file.relative_to(top)}")
            info.external_attr = (0o100755 if os.access(file, os.X_OK) else 0o100644) << 16
            zf.writestr(info, file.read_bytes())
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", "Name: nvidia-demo\n")
    return path


def unpacked(top: Path, dest: Path) -> Path:
    d = dest / "unpacked"
    shutil.copytree(top, d / top.name, symlinks=True)
    return d


def wheel_to_redist(wheel: Path, dest: Path) -> Path:
    """An NVIDIA wheel re-laid as the redist tarball of its package: the
    wheel's files under <package>-linux-x86_64-<version>-archive/, plus the
    unversioned `libX.so` symlinks the tarballs have and a wheel cannot hold."""
    from redist_features.archive import identify

    source = identify(str(wheel))
    with zipfile.ZipFile(wheel) as zf:
        members = [(info.filename, (info.external_attr >> 16) & 0o777 or 0o644, zf.read(info))
                   for info in zf.infolist() if not info.is_dir()]
    return _redist_archive(source.package, source.version, members, dest)


def installed_to_redist(distribution: str, package: str, dest: Path) -> Path:
    """The same, from a wheel pip has installed (importlib.metadata lists its
    files), with its license as the tarballs' LICENSE."""
    from importlib.metadata import distribution as find

    dist = find(distribution)
    members = []
    for f in dist.files:
        path = Path(f.locate())
        data = path.read_bytes()
        if f.parts[-1] in ("License.txt", "LICENSE.txt", "LICENSE") and ".dist-info" in f.parts[0]:
            members.append(("nvidia/-/LICENSE", 0o644, data))
        else:
            members.append(("/".join(f.parts), path.stat().st_mode & 0o777, data))
    return _redist_archive(package, dist.version, members, dest)


def _redist_archive(package: str, version: str, members, dest: Path) -> Path:
    top = f"{package}-linux-x86_64-{version}-archive"
    archive = dest / f"{top}.tar.xz"
    links = {}
    with tarfile.open(archive, "w:xz", preset=0) as tf:
        for filename, mode, data in members:
            parts = filename.split("/")
            if parts[0] != "nvidia" or len(parts) < 3:
                continue
            member = tarfile.TarInfo(f"{top}/{'/'.join(parts[2:])}")
            member.size, member.mode = len(data), mode
            tf.addfile(member, io.BytesIO(data))
            name = parts[-1]
            if parts[2] == "lib" and ".so." in name:
                links.setdefault(name.split(".so.")[0] + ".so", name)
        for link, target in sorted(links.items()):
            info = tarfile.TarInfo(f"{top}/lib/{link}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            tf.addfile(info)
    return archive
