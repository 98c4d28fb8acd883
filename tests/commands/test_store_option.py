"""`--store URL`: closures read from real binary caches that this machine's
Nix wrote (`nix copy --to file://...`, signed with a key from
`nix-store --generate-binary-cache-key`), served by a real HTTP server with
faults and latency (cacheserver.py). Every answer is compared with what the
local store gives for the same closure (support/closures.py's fixture)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cacheserver import CacheServer, self_signed
from conftest import cli_json, fails_closed, run_cli
from nixstore import NIX_FLAGS, needs_nix, nix_build, path_info
from closures import FIXTURE, NEWER

from closure_audit.cache.binary import BinaryCache
from closure_audit.cache.kept import FILE as KEPT
from closure_audit.errors import ClosureError

pytestmark = needs_nix

NAMES = ["torch", "torch2", "cudatoolkit", "magma", "blas.lib", "a", "b", "c", "d", "nccl"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("store")
    body = FIXTURE.rstrip().rstrip("}") + NEWER + "}"
    paths = {}
    for name in NAMES:
        (paths[name],) = nix_build(tmp, body, attr=name)
    return paths


@pytest.fixture(scope="module")
def caches(store, tmp_path_factory):
    """One cache per compression, each holding both torch closures, signed."""
    tmp = tmp_path_factory.mktemp("caches")
    subprocess.run(["nix-store", "--generate-binary-cache-key", "fixture-cache-1", tmp / "sec", tmp / "pub"],
                   check=True)
    subprocess.run(["nix-store", "--generate-binary-cache-key", "other-cache-1", tmp / "sec2", tmp / "pub2"],
                   check=True)
    out = {"pub": (tmp / "pub").read_text().strip(), "other_pub": (tmp / "pub2").read_text().strip(),
           "tmp": tmp}
    for compression in ("xz", "zstd", "bzip2", "none"):
        d = tmp / compression
        subprocess.run(["nix", *NIX_FLAGS, "copy", "--to",
                        f"file://{d}?compression={compression}&secret-key={tmp / 'sec'}",
                        store["torch"], store["torch2"]], check=True, capture_output=True)
        out[compression] = d
    return out


@pytest.fixture(scope="module")
def server(caches):
    with CacheServer(str(caches["xz"]), prefix="/cache") as s:
        yield s


@pytest.fixture(autouse=True)
def _fresh(server, tmp_path, monkeypatch):
    server.reset()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def narinfo_name(path: str) -> str:
    return os.path.basename(path)[:32] + ".narinfo"


# -- same answers as the local store ---------------------------------------------------

def test_sizes_match_nix_path_info(store, server):
    info = path_info(store["torch"])  # the local store, either JSON shape
    p = subprocess.run(["nix", *NIX_FLAGS, "path-info", "--json", "--recursive", "--closure-size", store["torch"]],
                       capture_output=True, text=True, check=True)
    data = json.loads(p.stdout)
    closure = {e["path"]: e["closureSize"] for e in data} if isinstance(data, list) else {
        k: v["closureSize"] for k, v in data.items()}
    _, report = cli_json("size", store["torch"], "--all", "--store", server.url)
    rows = {r["path"]: r for r in report["paths"]}
    assert set(rows) == set(info)
    assert {k: r["nar_size"] for k, r in rows.items()} == {k: v["narSize"] for k, v in info.items()}
    assert {k: r["closure_size"] for k, r in rows.items()} == closure
    _, local = cli_json("size", store["torch"], "--all")
    assert report["paths"] == local["paths"] and report["summary"] == local["summary"]
    assert not any(k.startswith("nar/") for k in server.requests)  # no NAR for sizes


def _comparable(report):
    return {k: report[k] for k in ("findings", "explanations", "summary")}


def test_why_gives_the_local_chains_and_evidence(store, server):
    """Chains, and evidence file by file and byte by byte, with the runpath
    entries judged used or unused as the local store judges them."""
    p, local = cli_json("why", store["torch"])
    q, remote = cli_json("why", store["torch"], "--store", server.url)
    assert p.returncode == q.returncode == 1
    assert _comparable(remote) == _comparable(local)
    kinds = {h["kind"] for f in remote["findings"] for hop in f["hops"] for h in hop["evidence"]}
    assert {"runpath-used", "runpath-unused", "text"} <= kinds
    for pattern in ("fixture-d", "fixture-c", "fixture-blas"):
        _, local = cli_json("why", store["torch"], pattern, "--all-chains")
        _, remote = cli_json("why", store["torch"], pattern, "--all-chains", "--store", server.url)
        assert _comparable(remote) == _comparable(local), pattern


@pytest.mark.parametrize("compression", ["zstd", "bzip2", "none"])
def test_evidence_from_every_compression(store, caches, compression):
    url = f"file://{caches[compression]}"
    _, local = cli_json("why", store["torch"], "fixture-d", "cudatoolkit", "--all-chains")
    _, remote = cli_json("why", store["torch"], "fixture-d", "cudatoolkit", "--all-chains", "--store", url)
    assert _comparable(remote) == _comparable(local)
    assert remote["summary"]["bytes_scanned"] > 0


def test_diff_and_gate(store, server, tmp_path):
    _, local = cli_json("diff", store["torch"], store["torch2"])
    _, remote = cli_json("diff", store["torch"], store["torch2"], "--store", server.url)
    assert remote["packages"] == local["packages"] and remote["summary"] == local["summary"]
    assert [f["file"] for f in remote["findings"]] == [f["file"] for f in local["findings"]]
    # Without --evidence no NAR is read, and the hops say so.
    assert not any(k.startswith("nar/") for k in server.requests)
    (hop,) = remote["findings"][0]["hops"]
    assert hop["evidence"] == [] and "--evidence" in hop["evidence_unavailable"]
    _, streamed = cli_json("diff", store["torch"], store["torch2"], "--store", server.url, "--evidence")
    assert streamed["findings"] == local["findings"]

    budgets = tmp_path / "budgets.toml"
    total = local["old"]["closure_size"]
    budgets.write_text(f'[targets.torch]\nmax-closure-size = "{total}"\nallow = ["magma-*", "cudatoolkit-*"]\n')
    p, report = cli_json("gate", "--budgets", str(budgets), "--target", f"torch={store['torch']}",
                         "--store", server.url)
    assert p.returncode == 0 and report["targets"][0]["closure_size"] == total
    budgets.write_text(f'[targets.torch]\nmax-closure-size = "{total - 1}"\nmax-growth = "0 B"\n'
                       f'baseline = "{store["torch2"]}"\n')
    p, remote = cli_json("gate", "--budgets", str(budgets), "--target", f"torch={store['torch']}",
                         "--store", server.url, "--evidence")
    _, local = cli_json("gate", "--budgets", str(budgets), "--target", f"torch={store['torch']}")
    assert p.returncode == 1 and remote["findings"] == local["findings"] and remote["targets"] == local["targets"]


def test_report_page(store, server, tmp_path):
    local, remote = tmp_path / "local.html", tmp_path / "remote.html"
    p = run_cli("report", store["torch"], "-o", str(local))
    q = run_cli("report", store["torch"], "-o", str(remote), "--store", server.url, "--evidence")
    assert p.returncode == q.returncode == 1, q.stderr
    # A binary cache records no closure sizes: the page leaves them out, as
    # for a dump without them; everything else is the same page.
    assert remote.read_text() == re.sub(r'"closure":\[[0-9,]*\]', '"closure":null', local.read_text(), count=1)


# -- concurrency and retries --------------------------------------------------------------

def _open(server, **kw) -> BinaryCache:
    kw.setdefault("backoff", 0.01)
    return BinaryCache(server.url, refresh=True, **kw)


def test_requests_run_in_parallel_within_the_bound(store, server):
    server.latency = 0.05
    closure = _open(server, workers=4).closure([store["torch"]])
    assert 1 < server.most_in_flight <= 4
    assert set(closure.graph) == set(path_info(store["torch"]))
    server.reset()
    server.latency = 0.05
    cli_json("size", store["torch"], "--store", server.url, "--http-connections", "2", "--refresh")
    assert server.most_in_flight == 2
    fails_closed(["size", store["torch"], "--store", server.url, "--http-connections", "0"], "--http-connections")


@pytest.mark.parametrize("kind", ["500", "drop", "truncate", "timeout"])
def test_transient_faults_are_retried(store, server, kind):
    """The first two requests of every path fail; the third answers."""
    # The timeout leaves a loaded machine time for an answer that is not stalled.
    server.fail_first, server.stall = (2, kind), 1.5
    cache = _open(server, timeout=0.6)
    closure = cache.closure([store["torch"]])
    info = path_info(store["torch"])
    assert {p: closure.nar_size(p) for p in closure.graph} == {k: v["narSize"] for k, v in info.items()}
    assert all(server.requests[narinfo_name(p)] == 3 for p in info)


# -- failing closed ---------------------------------------------------------------------------

def test_a_missing_referenced_narinfo(store, server, tmp_path):
    server.override[narinfo_name(store["cudatoolkit"])] = 404
    fails_closed(["size", store["torch"], "--store", server.url], store["cudatoolkit"], store["torch"])
    fails_closed(["why", store["torch"], "--store", server.url], store["cudatoolkit"])
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[targets.t]\nmax-closure-size = "5 GiB"\n')
    fails_closed(["gate", "--budgets", str(budgets), "--target", f"t={store['torch']}", "--store", server.url],
                 store["cudatoolkit"])


def test_an_answer_of_not_found_keeps_the_connection(store, server):
    """why-build asks about many paths a cache lacks: each 404 is read to its
    end and its connection used again, never one new connection per miss."""
    cache = _open(server, workers=1)
    missing = [f"{os.path.dirname(store['torch'])}/{c * 32}-absent" for c in "abcdfghijk"]
    assert [cache.narinfo(p, missing_ok=True) for p in missing] == [None] * 10
    assert cache.narinfo(store["torch"]).store_path == store["torch"]
    assert server.connections == 1


def test_narinfo_of_another_path(store, caches, server):
    server.override[narinfo_name(store["cudatoolkit"])] = (
        caches["xz"] / narinfo_name(store["magma"])).read_bytes()
    fails_closed(["size", store["torch"], "--store", server.url], store["cudatoolkit"], store["magma"])


def test_truncated_or_garbled_narinfo(store, caches, server):
    good = (caches["xz"] / narinfo_name(store["cudatoolkit"])).read_bytes()
    for damaged in (good[:len(good) // 2], good[:good.index(b"NarSize")], random.Random(3).randbytes(300),
                    good.replace(b"NarHash: sha256:", b"NarHash: sha256:x"), b""):
        server.override[narinfo_name(store["cudatoolkit"])] = damaged
        fails_closed(["size", store["torch"], "--store", server.url, "--refresh"], store["cudatoolkit"])


def test_server_answering_500_to_everything(store, server):
    server.status = 500
    fails_closed(["size", store["torch"], "--store", server.url], store["torch"], "HTTP 500")


def test_unreachable_or_not_a_cache(store, server, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    fails_closed(["size", store["torch"], "--store", f"http://127.0.0.1:{port}"], store["torch"], "refused")
    fails_closed(["size", store["torch"], "--store", server.url + "/nothing-here"], store["torch"],
                 "not a Nix binary cache")
    fails_closed(["size", store["torch"], "--store", f"file://{tmp_path}"], "not a Nix binary cache")
    fails_closed(["size", store["torch"], "--store", "ftp://example.invalid/"], "ftp")
    fails_closed(["size", "torch", "--store", server.url], "full store path")


def test_a_damaged_nar_fails_the_evidence(store, caches, server):
    info = (caches["xz"] / narinfo_name(store["torch"])).read_text()
    url = next(line.split(": ")[1] for line in info.splitlines() if line.startswith("URL: "))
    nar = (caches["xz"] / url).read_bytes()
    for damaged in (nar[:len(nar) // 2], nar[:-40] + bytes(40)):
        server.override[url] = damaged
        fails_closed(["why", store["torch"], "--store", server.url], store["torch"], "NAR")
    server.override[url] = 404
    fails_closed(["why", store["torch"], "--store", server.url], store["torch"], "no NAR")


# -- signatures ------------------------------------------------------------------------------------

def test_signatures(store, caches, server):
    keys = caches["pub"]
    _, report = cli_json("size", store["torch"], "--store", server.url, "--trusted-public-keys",
                         f"{caches['other_pub']} {keys}")
    assert report["summary"]["paths"] == len(path_info(store["torch"]))
    fails_closed(["size", store["torch"], "--store", server.url, "--trusted-public-keys", caches["other_pub"]],
                 store["torch"], "untrusted")
    name = narinfo_name(store["magma"])
    good = (caches["xz"] / name).read_text()
    size_line = next(line for line in good.splitlines() if line.startswith("NarSize: "))
    tampered = {
        "NarSize": good.replace(size_line, f"NarSize: {int(size_line.split()[1]) - 1}"),
        "References": good.replace("References: ", f"References: {os.path.basename(store['d'])} ", 1),
        "no Sig": "".join(line + "\n" for line in good.splitlines() if not line.startswith("Sig: ")),
    }
    for what, text in tampered.items():
        server.override[name] = text.encode()
        fails_closed(["size", store["torch"], "--store", server.url, "--refresh", "--trusted-public-keys", keys],
                     store["magma"])
    # Without keys nothing is checked: the tampered size is what the cache says.
    server.override[name] = tampered["NarSize"].encode()
    _, report = cli_json("size", store["magma"], "--store", server.url, "--refresh")
    assert report["paths"][0]["nar_size"] == int(size_line.split()[1]) - 1
    for bad in ("nonsense", "name:", "name:AAAA"):
        fails_closed(["size", store["torch"], "--store", server.url, "--trusted-public-keys", bad],
                     "--trusted-public-keys")
    fails_closed(["size", store["torch"], "--trusted-public-keys", keys], "needs --store")


# -- the local narinfo cache ----------------------------------------------------------------------

def kept_rows(xdg) -> dict[str, str]:
    """The local narinfo cache, read with SQLite itself: hash part -> text."""
    with sqlite3.connect(xdg / "closure-audit" / KEPT) as db:
        return dict(db.execute("SELECT hash, text FROM narinfo"))


def test_narinfos_are_kept_between_runs(store, server, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    n = len(path_info(store["torch"]))
    cli_json("size", store["torch"], "--store", server.url, env=env)
    fetched = sum(v for k, v in server.requests.items() if k.endswith(".narinfo"))
    assert fetched == n
    # One file holds them all, each as the server sent it.
    assert KEPT in os.listdir(tmp_path / "xdg" / "closure-audit")
    assert set(os.listdir(tmp_path / "xdg" / "closure-audit")) <= {KEPT, KEPT + "-wal", KEPT + "-shm"}
    magma = narinfo_name(store["magma"])
    rows = kept_rows(tmp_path / "xdg")
    assert len(rows) == n and rows[magma[:32]] == (Path(server.root) / magma).read_text()
    server.requests.clear()
    _, again = cli_json("size", store["torch"], "--store", server.url, env=env)
    assert not any(k.endswith(".narinfo") for k in server.requests)
    assert again["summary"]["paths"] == n
    cli_json("size", store["torch"], "--store", server.url, "--refresh", env=env)
    assert sum(v for k, v in server.requests.items() if k.endswith(".narinfo")) == n
    # A damaged copy, or one of another path, is fetched again and replaced, never used.
    for damage in ("StorePath: /nix/store/broken\n", rows[narinfo_name(store["d"])[:32]]):
        with sqlite3.connect(tmp_path / "xdg" / "closure-audit" / KEPT) as db:
            db.execute("UPDATE narinfo SET text = ? WHERE hash = ?", (damage, magma[:32]))
        server.requests.clear()
        _, again = cli_json("size", store["torch"], "--store", server.url, "--all", env=env)
        assert server.requests[magma] == 1 and sum(server.requests.values()) == 2  # and nix-cache-info
        assert again["summary"]["paths"] == n and kept_rows(tmp_path / "xdg")[magma[:32]] == rows[magma[:32]]
    # Signatures are checked on what is kept too.
    fails_closed(["size", store["torch"], "--store", server.url, "--trusted-public-keys",
                  "x:" + "A" * 43 + "="], "untrusted", env=env)


def test_concurrent_runs_share_the_cache(store, server, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    server.latency = 0.01
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: run_cli("size", store["torch"], "--all", "--json", "--store", server.url,
                                                "--refresh", env=env), range(4)))
    assert all(p.returncode == 0 and not p.stderr for p in runs), [p.stderr for p in runs]
    assert len({p.stdout for p in runs}) == 1
    rows = kept_rows(tmp_path / "xdg")
    assert len(rows) == len(path_info(store["torch"]))
    assert all(text == (Path(server.root) / f"{h}.narinfo").read_text() for h, text in rows.items())


@pytest.mark.parametrize("damage", ["read-only", "read-only, kept", "garbage", "locked"])
def test_a_cache_that_cannot_be_used_only_slows_runs(store, server, tmp_path, damage):
    """A local cache that cannot be written, is not a database, or is held
    by another run's transaction: the run fetches, answers right, says
    nothing, and the next run does too."""
    xdg = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(xdg)}
    _, want = cli_json("size", store["torch"], "--store", server.url, "--all", env={"XDG_CACHE_HOME": str(tmp_path / "o")})
    n = len(path_info(store["torch"]))
    (xdg / "closure-audit").mkdir(parents=True)
    holder = None
    if damage == "garbage":
        (xdg / "closure-audit" / KEPT).write_bytes(b"not a database\n" * 100)
    elif damage.startswith("read-only"):
        if damage.endswith("kept"):
            cli_json("size", store["torch"], "--store", server.url, "--all", env=env)
        os.chmod(xdg / "closure-audit", 0o555)
    else:
        cli_json("size", store["torch"], "--store", server.url, "--all", "--refresh", env=env)
        holder = sqlite3.connect(xdg / "closure-audit" / KEPT, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    # Root writes anywhere: without its capabilities, it is only the directory's owner (r-x).
    bare = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if os.geteuid() == 0 else []
    try:
        for refresh in (["--refresh"], [], []):
            server.requests.clear()
            p = subprocess.run([*bare, sys.executable, "-m", "closure_audit", "size", store["torch"], "--store",
                                server.url, "--all", "--json", *refresh], capture_output=True, text=True,
                               env={**os.environ, **env}, timeout=120)
            assert p.returncode == 0 and p.stderr == "" and json.loads(p.stdout) == want, p.stderr
            fetched = sum(v for k, v in server.requests.items() if k.endswith(".narinfo"))
            assert fetched == (0 if damage == "locked" and not refresh else n)
    finally:
        if holder is not None:
            holder.close()
        os.chmod(xdg / "closure-audit", 0o755)
    if damage == "garbage":
        assert (xdg / "closure-audit" / KEPT).read_bytes() == b"not a database\n" * 100
    elif damage.startswith("read-only"):
        assert os.listdir(xdg / "closure-audit") == ([KEPT] if damage.endswith("kept") else [])


def test_library_errors_name_the_path(store, server):
    server.override[narinfo_name(store["d"])] = 404
    with pytest.raises(ClosureError, match=store["d"]):
        _open(server).closure([store["torch"]])
    assert threading.active_count() < 20  # the pool is gone


def test_nix_can_read_what_is_kept(caches, store, tmp_path):
    """The fixture caches are real: Nix itself reads them back."""
    nix = shutil.which("nix")
    p = subprocess.run([nix, *NIX_FLAGS, "path-info", "--store", f"file://{caches['xz']}", "--json",
                        store["magma"]], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


LOADER_FIXTURE = r"""
rec {
  ld = sh "fixture-ld-1.0" ''
    mkdir -p $out/lib
    cp /lib64/ld-linux-x86-64.so.2 $out/lib/
  '';
  dep = clib "fixture-dep-1.0" "libdep.so" "int d(void) { return 1; }" "";
  # libdep.so has no SONAME and is linked by path: DT_NEEDED is its full path.
  app = sh "fixture-app-1.0" ''
    mkdir -p $out/bin
    echo 'int d(void); int main(void) { return d(); }' > m.c
    gcc -o $out/bin/app m.c ${dep}/lib/libdep.so -Wl,--dynamic-linker=${ld}/lib/ld-linux-x86-64.so.2
  '';
}
"""


def test_needed_and_interpreter_evidence(tmp_path):
    (app,) = nix_build(tmp_path, LOADER_FIXTURE, attr="app")
    cache = tmp_path / "cache"
    subprocess.run(["nix", *NIX_FLAGS, "copy", "--to", f"file://{cache}?compression=zstd", app], check=True,
                   capture_output=True)
    _, local = cli_json("why", app, "fixture-dep", "fixture-ld")
    _, remote = cli_json("why", app, "fixture-dep", "fixture-ld", "--store", f"file://{cache}")
    assert _comparable(remote) == _comparable(local)
    kinds = {e["hops"][0]["evidence"][0]["kind"] for e in remote["explanations"]}
    assert kinds == {"needed", "interpreter"}


def test_https_with_a_certificate_the_client_trusts_or_not(store, caches, tmp_path):
    """A real TLS server with a certificate made here: trusted through
    SSL_CERT_FILE it serves the closure; untrusted it fails closed."""
    tls = self_signed(tmp_path)
    with CacheServer(str(caches["xz"]), tls=tls) as server:
        assert server.url.startswith("https://")
        _, local = cli_json("size", store["torch"], "--all")
        _, remote = cli_json("size", store["torch"], "--all", "--store", server.url,
                             env={"SSL_CERT_FILE": str(tmp_path / "cert.pem")})
        assert remote["paths"] == local["paths"]
        fails_closed(["size", store["torch"], "--store", server.url], "certificate")
