"""cuFile's RDMA helper (libcufile_rdma.so.1) needs rdma-core's libibverbs
and librdmacm, which a venv never holds: only GPUDirect Storage over RDMA is
lost. The verdict must not depend on the root audited: the venv, its
site-packages or site-packages/nvidia give the same rule and severity, in
CUDA 13's layout (nvidia/cu13/lib) and CUDA 12's (nvidia/cufile/lib). The
real loader: libcufile loads, and its dlopen of the helper fails on libibverbs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from audits import audit, host_policy

pytestmark = pytest.mark.fhs

OPENER = '#include <dlfcn.h>\nint open_rdma(void) { return dlopen("libcufile_rdma.so.1", RTLD_NOW) != 0; }\n'

RUN = textwrap.dedent("""
    import ctypes, sys
    lib = ctypes.CDLL(sys.argv[1])
    print(lib.open_rdma())
    try:
        ctypes.CDLL(sys.argv[2])
    except OSError as e:
        print(e)
""")


@pytest.mark.parametrize("folder", ["cu13", "cufile"])
@pytest.mark.parametrize("with_opener", [True, False])
def test_rdma_needs_are_judged_alike_from_every_root(build, tmp_path, folder, with_opener):
    site_rel = "venv/lib/python3.12/site-packages"
    lib = f"{site_rel}/nvidia/{folder}/lib"
    (build.root / "venv").mkdir()
    (build.root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    verbs = build.lib("rdma-core/libibverbs.so.1")
    cm = build.lib("rdma-core/librdmacm.so.1")
    rdma = build.lib(f"{lib}/libcufile_rdma.so.1", links=[verbs, cm], runpath=["$ORIGIN"])
    cufile = build.lib(f"{lib}/libcufile.so.0", code=OPENER, runpath=["$ORIGIN"]) if with_opener else None
    build.lib(f"{site_rel}/nvidia/{folder}/lib/libcudart.so.{13 if folder == 'cu13' else 12}")
    roots = [build.root / "venv", build.root / site_rel, build.root / site_rel / "nvidia"]
    verdicts = []
    for root in roots:
        report = audit(root, policy=host_policy(tmp_path))
        verdicts.append(sorted((f.rule, f.severity, f.fields.get("needed")) for f in report.findings
                               if f.file == str(rdma)))
    assert verdicts[0] == verdicts[1] == verdicts[2], verdicts
    assert {n for _, _, n in verdicts[0]} == {"libibverbs.so.1", "librdmacm.so.1"}
    assert {(r, s) for r, s, _ in verdicts[0]} == {("plugin-unresolved-library", "warning")}
    if cufile is not None:
        p = subprocess.run([sys.executable, "-c", RUN, str(cufile), str(rdma)], capture_output=True, text=True,
                           check=True, env={"PATH": "/usr/bin:/bin"})
        opened, error = p.stdout.splitlines()
        assert opened == "0" and "libibverbs.so.1" in error  # libcufile loads; only the helper fails
