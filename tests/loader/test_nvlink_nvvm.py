"""nvlink opens libnvvm by a path it builds from its own location
(<its directory>/../nvvm/lib64/libnvvm.so, loader/libraries.py OWN_LOCATION),
not by a search: the tree's copy, whatever the host's directories hold. The
program here does what nvlink does; run for real, it maps the tree's file."""

from __future__ import annotations

import subprocess

import pytest

from audits import audit, host_policy, rules

pytestmark = pytest.mark.fhs

NVLINK = r'''
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    char self[4096], path[4200], line[4400];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) return 2;
    self[n] = 0;
    snprintf(path, sizeof path, "%s/../nvvm/lib64/%s", dirname(self), "libnvvm.so");
    if (!dlopen(path, RTLD_NOW)) return 1;
    FILE *maps = fopen("/proc/self/maps", "r");
    while (fgets(line, sizeof line, maps)) if (strstr(line, "libnvvm")) fputs(line, stdout);
    return 0;
}
'''


@pytest.mark.parametrize("present", [True, False])
def test_nvlink_takes_libnvvm_beside_its_own_directory(build, tmp_path, present):
    cu13 = "venv/lib/python3.12/site-packages/nvidia/cu13"
    (build.root / "venv").mkdir()
    (build.root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    host = tmp_path / "host"
    host.mkdir()
    build.lib("../host/libnvvm.so", code="int host_nvvm = 1;\n")
    nvvm = build.lib(f"{cu13}/nvvm/lib64/libnvvm.so", code="int nvvm = 1;\n")
    src = tmp_path / "nvlink.c"
    src.write_text(NVLINK)
    nvlink = build.path(f"{cu13}/bin/nvlink")
    subprocess.run(["gcc", "-o", str(nvlink), str(src), "-ldl"], check=True)
    if not present:
        nvvm.unlink()
    report = audit(build.root / "venv", policy=host_policy(host))
    rows = [r for r in report.opened if r.file == str(nvlink) and r.name == "libnvvm.so"]
    (row,) = rows
    real = subprocess.run([str(nvlink)], capture_output=True, text=True)
    found = rules(report)
    if present:
        assert (row.how, row.path, row.inside) == ("path", str(nvvm), True)
        assert "cuda-library-from-host" not in found
        assert real.returncode == 0 and str(nvvm) in real.stdout  # the tree's file, not the host's
    else:
        assert (row.how, row.path) == ("not-found", None)
        assert real.returncode == 1  # the host's copy does not answer a path
        assert "cuda-library-from-host" not in found  # the host's copy is never what it gets
        (f,) = [f for f in found["unresolved-dlopen-library"] if f.file == str(nvlink)]
        assert f"nvlink opens {nvvm}, a path built from its own location" in f.message
