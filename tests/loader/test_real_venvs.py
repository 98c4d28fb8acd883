"""Two real GPU venvs, judged by the real loader (docs/internals/loader.md#real-venvs):

- torch-cupy-jax: `torch==2.14.1 torchvision==0.29.1 cupy-cuda13x 'jax[cuda13]' cuda-pathfinder`;
- torch-tensorflow: `torch==2.14.1 'tensorflow[and-cuda]'`, CUDA 12 beside CUDA 13, in both import orders.

Their ground truth is recorded in venvs/*.json by support/venvtruth.py:
fresh processes of the venv's Python that import each framework and its
extension modules, run its first use, and read /proc/self/maps, with
stand-in driver libraries that report one device. The default suite needs
no download: venvstub.py rebuilds each tree as stub ELF files at the same
paths (same SONAME, DT_NEEDED, RPATH/RUNPATH), and there

- the model (audit's processes, the union in each recorded order) must
  map the file the real loader mapped for every CUDA soname, and fail
  exactly the module loads that failed: no false error, no missed failure;
- the real loader, replaying the model's loads on the stubs, must map
  what it mapped on the real files (the stub tree is faithful).

Opt-in (`-m venvs`): NIXCUDA_VENVS names the real venvs
(`torch-cupy-jax=DIR,torch-tensorflow=DIR`); each is recorded again and
must match its fixture.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from audits import audit
import venvstub
import venvtruth

HERE = Path(__file__).resolve().parent / "venvs"
FIXTURES = sorted(p.stem for p in HERE.glob("*.json"))
pytestmark = pytest.mark.fhs


def load(name: str) -> dict:
    return json.loads((HERE / f"{name}.json").read_text())


@pytest.fixture(scope="module", params=FIXTURES)
def stub(request, tmp_path_factory):
    fixture = load(request.param)
    root = tmp_path_factory.mktemp(request.param)
    venv, site = venvstub.build(fixture, root)
    driver = venvtruth.standin(str(root / "driver"))
    return request.param, fixture, venv, site, driver


def model(stub, monkeypatch, order=None):
    """audit's processes on the stub tree, from the preloads the model read of the real venv."""
    _name, fixture, venv, site, driver = stub
    monkeypatch.setattr("closure_audit.pipeline.audit.read_preloads",
                        lambda roots, listing: venvstub.preloads(fixture, site))
    report = audit(venv, policy=venvtruth.policy(driver), import_order=order)
    return report


def recorded(fixture):
    """Each recorded process with the import order the model is asked for."""
    for proc in fixture["processes"]:
        yield proc, tuple(proc["frameworks"]) if proc["name"] == "union" else None


def test_the_model_answers_as_the_real_loader_did_in_every_process_and_order(stub, monkeypatch):
    _name, fixture, venv, site, driver = stub
    site_real = os.path.realpath(site)
    checked = 0
    for truth, order in recorded(fixture):
        report = model(stub, monkeypatch, order)
        procs = {p.name: p for p in report.processes}
        proc = procs[truth["name"]]
        assert list(proc.frameworks) == truth["frameworks"]
        said = venvtruth.model_answer(proc, report.opened, site_real, driver, fixture["libraries"],
                                      truth["skipped_frameworks"])
        assert venvtruth.differences(truth["real"], said, truth["skipped"]) == [], truth["name"]
        checked += len(truth["real"]["cuda"])
    assert checked >= 20  # the fixture holds CUDA libraries to compare, not an empty record


def test_the_real_loader_maps_on_the_stub_tree_what_it_mapped_on_the_real_venv(stub, monkeypatch):
    """Replaying the model's loads on the stubs with the real loader gives
    the recorded files for every CUDA soname the process's objects hold
    and the recorded failures: the stub tree stands for the real one."""
    _name, fixture, venv, site, driver = stub
    site_real = os.path.realpath(site)
    for truth, order in recorded(fixture):
        report = model(stub, monkeypatch, order)
        proc = {p.name: p for p in report.processes}[truth["name"]]
        failed, mapped = venvstub.replay(proc, driver, truth["skipped_frameworks"])
        skipped = set(truth["skipped"])
        again = venvtruth.answer(mapped, failed, site_real, driver, fixture["libraries"])
        said = venvtruth.model_answer(proc, report.opened, site_real, driver, fixture["libraries"],
                                      truth["skipped_frameworks"])
        for soname, files in said["cuda"].items():
            assert again["cuda"].get(soname) == truth["real"]["cuda"].get(soname) == files, (truth["name"], soname)
        real_failed = [f for f in truth["real"]["failed"] if f[0] not in skipped]
        assert [f for f in again["failed"] if f[0] not in skipped] == real_failed, truth["name"]


def test_each_fixture_is_small_and_names_no_machine(stub):
    name = stub[0]
    text = (HERE / f"{name}.json").read_text()
    assert len(text) < 400_000
    fixture = json.loads(text)
    assert fixture["version"] == venvtruth.VERSION
    assert not any(k.startswith("/") for k in fixture["libraries"])
    assert not re.search(r'(?<![\w/.])/(work|tmp|root|home)/', text)  # NVIDIA's own runpaths may say /data/tmp/


VENVS = dict(v.split("=", 1) for v in os.environ.get("NIXCUDA_VENVS", "").split(",") if "=" in v)


@pytest.mark.venvs
@pytest.mark.skipif(not VENVS, reason="set NIXCUDA_VENVS to name=DIR of the real venvs")
@pytest.mark.parametrize("name", FIXTURES)
def test_the_fixture_is_what_the_real_venv_records_now(name, tmp_path):
    if name not in VENVS:
        pytest.skip(f"NIXCUDA_VENVS names no {name}")
    fixture = load(name)
    orders = sorted({tuple(p["frameworks"]) for p in fixture["processes"] if p["name"] == "union"},
                    key=lambda o: [p["frameworks"] for p in fixture["processes"]].index(list(o)))
    driver = venvtruth.standin(str(tmp_path / "driver"))
    again = venvtruth.record(os.path.abspath(VENVS[name]), orders, driver)
    assert again["libraries"] == fixture["libraries"]
    assert again["preloads"] == fixture["preloads"]
    for now, then in zip(again["processes"], fixture["processes"], strict=True):
        assert (now["name"], now["frameworks"], now["real"]) == (then["name"], then["frameworks"], then["real"])
        assert now["model_differs"] == []


@pytest.mark.venvs
@pytest.mark.skipif("torch-tensorflow" not in VENVS, reason="set NIXCUDA_VENVS to name=DIR of the real venvs")
def test_the_overwritten_cudnn_and_nccl_are_named_by_the_bytes_on_disk():
    """pip installs nvidia-cudnn-cu12 over -cu13 (and the NCCL pair): the
    finding names the distribution whose RECORD hash the file on disk has,
    computed here from the RECORDs themselves."""
    import base64
    import csv
    import hashlib

    site = venvtruth.site_of(VENVS["torch-tensorflow"])
    report = audit(VENVS["torch-tensorflow"])
    found = {os.path.relpath(f.file, site): f for f in report.findings if f.rule == "distribution-file-conflict"}
    assert set(found) == {"nvidia/cudnn/lib/libcudnn.so.9", "nvidia/nccl/lib/libnccl.so.2"}
    for rel, f in found.items():
        with open(os.path.join(site, rel), "rb") as lib:
            digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(lib.read()).digest()).rstrip(b"=").decode()
        owners = []
        for info in Path(site).glob("*.dist-info"):
            with open(info / "RECORD", newline="") as record:
                if any(row[:2] == [rel, digest] for row in csv.reader(record)):
                    owners.append(info.name)
        (owner,) = owners
        assert owner.startswith(f.fields["on_disk"].replace("-", "_") + "-") and f.fields["on_disk"].endswith("-cu12")
        assert f.fields["losers"][0]["required_by"] == ["torch"]
