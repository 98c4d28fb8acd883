"""Triton's driver finds libcuda.so.1 by running `/sbin/ldconfig -p`
(loader/preloads/triton.py's libcuda_search): a Nix store path holding such
a Triton is triton-libcuda-ldconfig, naming TRITON_LIBCUDA_PATH where its
files read it. ldconfig -p without a cache (NixOS keeps none) fails: checked
with the real ldconfig."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from audits import audit, rules
from conftest import run_cli

DRIVER = '''
import functools
import subprocess
from triton import knobs

@functools.lru_cache()
def libcuda_dirs():
    if env_libcuda_path := knobs.nvidia.libcuda_path:
        return [env_libcuda_path]
    libs = subprocess.check_output(["/sbin/ldconfig", "-p"]).decode(errors="ignore")
    return [line.split()[-1] for line in libs.splitlines() if "libcuda.so.1" in line]
'''

PATCHED = '''
def libcuda_dirs():
    return ["/run/opengl-driver/lib"]
'''


@pytest.mark.parametrize("shape", ["ldconfig", "patched", "no-variable"])
def test_triton_in_a_store_path(build, monkeypatch, shape):
    store = build.root / "store"
    monkeypatch.setenv("NIX_STORE_DIR", str(store))
    out = store / "aaaa-python3.12-triton-3.9.0"
    site = out / "lib/python3.12/site-packages"
    build.lib("store/aaaa-python3.12-triton-3.9.0/lib/python3.12/site-packages/triton/_C/libtriton.so",
              runpath=["/run/opengl-driver/lib"])
    driver = site / "triton/backends/nvidia/driver.py"
    driver.parent.mkdir(parents=True)
    driver.write_text(PATCHED if shape == "patched" else DRIVER)
    if shape != "no-variable":
        (site / "triton/knobs.py").write_text('libcuda_path = env_opt_str("TRITON_LIBCUDA_PATH")\n')
    report = audit(out)
    found = rules(report).get("triton-libcuda-ldconfig", [])
    if shape == "patched":
        assert found == []
        return
    (f,) = found
    assert (f.severity, f.file) == ("warning", str(driver))
    if shape == "ldconfig":
        assert f.fields["variable"] == "TRITON_LIBCUDA_PATH"
        assert "set TRITON_LIBCUDA_PATH=/run/opengl-driver/lib" in f.message
        # The command's JSON (checked against the schema by run_cli): a warning, exit status 0.
        p = run_cli("audit", "--json", str(out), env={"NIX_STORE_DIR": str(store)})
        assert p.returncode == 0, p.stderr
        (j,) = [x for x in json.loads(p.stdout)["findings"] if x["rule"] == "triton-libcuda-ldconfig"]
        assert j["driver_dirs"] == ["/run/opengl-driver/lib"] and j["file"] == str(driver)
    else:
        assert f.fields["variable"] is None and "no variable" in f.message


@pytest.mark.skipif(not shutil.which("ldconfig", path="/sbin:/usr/sbin"), reason="no ldconfig")
def test_ldconfig_p_without_a_cache_fails(tmp_path):
    """What Triton meets on NixOS: no ld.so.cache, and ldconfig -p exits non-zero."""
    ldconfig = shutil.which("ldconfig", path="/sbin:/usr/sbin")
    p = subprocess.run([ldconfig, "-p", "-C", str(tmp_path / "ld.so.cache")], capture_output=True, text=True)
    assert p.returncode != 0 and "cache" in p.stderr.lower()
