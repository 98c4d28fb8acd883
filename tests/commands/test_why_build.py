"""`why-build` on real derivations that mirror the CUDA case: cudart and
zlib shared, magma and nccl reading `cudaCapabilities`, torch on them, an
env on torch. The default variant is built, copied to a compressing,
signed `file://` cache (also served over http on the loopback), and its
outputs deleted from the local store, so the cache is the only source.
Every plan is compared with `nix-build --dry-run`'s with the same
substituter. Names carry a per-module tag: other runs sharing the store
never touch these paths."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest

from cacheserver import CacheServer
from conftest import fails_closed, run_cli, validate
from nixstore import NIX_FLAGS, needs_nix
from whybuild import instantiate, VARIANTS

pytestmark = needs_nix

DEFAULT_CAPS = "7.5;8.0;8.6;8.9;9.0"

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whybuild")
    tag = "wb" + uuid.uuid4().hex[:8]
    expr = tmp / "variants.nix"
    expr.write_text(VARIANTS)
    ref = instantiate(expr, tag)
    built = subprocess.run(["nix-build", ref, "--no-out-link", "--option", "substituters", ""],
                           capture_output=True, text=True, check=True).stdout.split()
    subprocess.run(["nix-store", "--generate-binary-cache-key", f"{tag}-1", tmp / "sec", tmp / "pub"], check=True)
    cache = tmp / "cache"
    subprocess.run(["nix", *NIX_FLAGS, "copy", "--to", f"file://{cache}?compression=xz&secret-key={tmp / 'sec'}",
                    *built], check=True, capture_output=True)
    closure = subprocess.run(["nix-store", "--query", "--requisites", *built], capture_output=True, text=True,
                             check=True).stdout.split()
    subprocess.run(["nix-store", "--delete", *closure], check=True, capture_output=True)
    assert not any(os.path.exists(p) for p in closure)
    w = {"tmp": tmp, "tag": tag, "expr": expr, "ref": ref, "cache": cache, "closure": closure,
         "pub": (tmp / "pub").read_text().strip()}
    with CacheServer(str(cache)) as server:
        w["server"] = server
        yield w


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # cold narinfo caches, ours and Nix's


def nix_dry_run(drv: str, url: str, pub: str) -> tuple[set[str], set[str], str]:
    """Nix's own plan: the derivations it will build and the paths it will fetch."""
    p = subprocess.run(["nix-build", drv, "--dry-run", "--option", "substituters", url,
                        "--option", "trusted-public-keys", pub], capture_output=True, text=True, check=True)
    lists: dict[str, set[str]] = {"built": set(), "fetched": set()}
    current = None
    for line in p.stderr.splitlines():
        head = re.search(r"will be (built|fetched)", line)
        if head:
            current = head[1]
        elif line.startswith("  /") and current:
            lists[current].add(line.strip())
        else:
            current = None
    return lists["built"], lists["fetched"], p.stderr


def why_build(world, target: str, *extra: str, url: str | None = None):
    p = run_cli("why-build", target, "--store", url or f"file://{world['cache']}", "--trusted-public-keys",
                world["pub"], *extra)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def names_of(paths) -> set[str]:
    return {re.sub(r"^/nix/store/[a-z0-9]{32}-|-wb[0-9a-f]{8}(\.drv)?$", "", p) for p in paths}


def narinfo(cache, path: str) -> dict:
    text = (cache / f"{os.path.basename(path)[:32]}.narinfo").read_text()
    return dict(line.split(": ", 1) for line in text.splitlines())


@pytest.mark.parametrize("over", ["file", "http"])
def test_narrowed_capabilities(world, over, tmp_path):
    target = instantiate(world["expr"], world["tag"], caps="8.9")
    url = f"file://{world['cache']}" if over == "file" else world["server"].url
    p = why_build(world, target, "--like", world["ref"], "--json", "--markdown", str(tmp_path / "pr.md"), url=url)
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    validate(report)
    assert report["command"] == "why-build"
    built, fetched, _ = nix_dry_run(target, url, world["pub"])
    assert {b["drv"] for b in report["build"]} == built
    assert {f["path"] for f in report["fetch"]} == fetched
    assert names_of(built) == {"magma-2.9.0", "nccl-2.28.3", "torch-2.9.0", "python3-env"}
    assert names_of(fetched) == {"cuda12.9-cudart-12.9.79", "zlib-1.3.1"}
    sizes = [narinfo(world["cache"], f["path"]) for f in report["fetch"]]
    assert report["download_size"] == sum(int(n["FileSize"]) for n in sizes)
    assert report["nar_size"] == sum(int(n["NarSize"]) for n in sizes) != report["download_size"]
    causes = {c["name"].removesuffix("-" + world["tag"]): c for c in report["root_causes"]}
    assert set(causes) == {"magma-2.9.0", "nccl-2.28.3"}
    for c in causes.values():
        assert c["like_cached"] is True and c["like"].endswith(f"{c['name']}.drv")
        assert c["settings"] == [{"setting": "cudaCapabilities", "old": DEFAULT_CAPS, "new": "8.9"}]
        (diff,) = [d for d in c["differences"] if d["kind"] == "env"]
        assert diff["name"] == "cudaCapabilities" and diff["dropped"] == ["7.5", "8.0", "8.6", "9.0"]
    because = {names_of([b["drv"]]).pop(): names_of(b["because"]) for b in report["build"]}
    assert because["torch-2.9.0"] == {"magma-2.9.0", "nccl-2.28.3"} and because["python3-env"] == {"torch-2.9.0"}
    md = (tmp_path / "pr.md").read_text()
    assert (f"this change takes `python3-env-{world['tag']}` off the cache: "
            f"cudaCapabilities 7.5;8.0;8.6;8.9;9.0 → 8.9") in md
    text = why_build(world, target, "--like", world["ref"], url=url)
    assert text.returncode == 1
    assert re.search(r"torch-2\.9\.0-wb\w+ ← magma-2\.9\.0-wb\w+, nccl-2\.28\.3-wb\w+", text.stdout), text.stdout
    assert "cudaCapabilities 7.5;8.0;8.6;8.9;9.0 → 8.9" in text.stdout


def test_a_patched_shared_dependency(world, tmp_path):
    target = instantiate(world["expr"], world["tag"], zlibPatch=True)
    p = why_build(world, target, "--like", world["ref"], "--json")
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    validate(report)
    built, fetched, _ = nix_dry_run(target, f"file://{world['cache']}", world["pub"])
    assert {b["drv"] for b in report["build"]} == built and {f["path"] for f in report["fetch"]} == fetched
    assert names_of(built) == {"zlib-1.3.1", "torch-2.9.0", "python3-env"}
    assert names_of(fetched) == {"cuda12.9-cudart-12.9.79", "magma-2.9.0", "nccl-2.28.3"}
    (cause,) = report["root_causes"]
    assert cause["name"] == f"zlib-1.3.1-{world['tag']}" and cause["like_cached"] is True
    kinds = {(d["kind"], d["name"].split("-")[0]): d for d in cause["differences"]}
    assert set(kinds) == {("env", "patches"), ("source", "zlib")}
    assert kinds["env", "patches"]["old"] is None and kinds["env", "patches"]["new"].endswith("-cve.patch")
    assert cause["settings"] == []
    # The step summary is appended to, as the gate's is.
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    p = run_cli("why-build", target, "--store", f"file://{world['cache']}", "--like", world["ref"],
                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert p.returncode == 1 and "zlib-1.3.1" in p.stdout
    text = summary.read_text()
    assert text.startswith("earlier step\n## closure-audit why-build: ❌")
    assert re.search(r"\| `zlib-1\.3\.1-wb\w+` \| `zlib-1\.3\.1-wb\w+\.drv` \| yes \| — \| env patches, source ", text), text


def test_the_reference_itself_needs_nothing_built(world):
    p = why_build(world, world["ref"], "--like", world["ref"], "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    validate(report)
    assert report["build"] == [] and report["root_causes"] == []
    assert {f["path"] for f in report["fetch"]} == set(world["closure"]) - {world["ref"]}
    built, fetched, _ = nix_dry_run(world["ref"], f"file://{world['cache']}", world["pub"])
    assert built == set() and fetched == {f["path"] for f in report["fetch"]}
    text = why_build(world, world["ref"])
    assert text.returncode == 0 and "nothing to build" in text.stdout


def test_the_users_substituters_are_the_default(world):
    """Without --store, Nix's own settings say where to look (here through NIX_CONFIG)."""
    target = instantiate(world["expr"], world["tag"], caps="8.9")
    p = run_cli("why-build", target, "--json", env={
        "NIX_CONFIG": f"substituters = file://{world['cache']}\ntrusted-public-keys = {world['pub']}"})
    assert p.returncode == 1, p.stderr
    assert names_of(f["path"] for f in json.loads(p.stdout)["fetch"]) == {"cuda12.9-cudart-12.9.79", "zlib-1.3.1"}
    # A key that did not sign the cache: nothing is trusted, so nothing can be fetched; the run fails closed.
    other = "other-1:" + "A" * 43 + "="
    fails_closed(["why-build", target, "--store", f"file://{world['cache']}", "--trusted-public-keys", other],
                 "not trusted")


def test_requests_in_flight_are_bounded_and_faults_retried(world):
    """Over http, the walk keeps at most --http-connections requests in
    flight, and a cache that fails the first request of every path (500, or
    the connection dropped without an answer) still gives Nix's plan."""
    target = instantiate(world["expr"], world["tag"], caps="8.9")
    built, fetched, _ = nix_dry_run(target, world["server"].url, world["pub"])
    server = world["server"]
    try:
        for kind in ("500", "drop"):
            server.reset()
            server.latency, server.fail_first = 0.02, (1, kind)
            p = why_build(world, target, "--json", "--http-connections", "2", "--refresh", url=server.url)
            assert p.returncode == 1, p.stderr
            report = json.loads(p.stdout)
            assert {b["drv"] for b in report["build"]} == built
            assert {f["path"] for f in report["fetch"]} == fetched
            assert server.most_in_flight == 2
            asked = {k: n for k, n in server.requests.items() if k.endswith(".narinfo")}
            # What the cache holds: the fault, then the answer; what it lacks: one 404.
            assert asked == {k: 2 if (world["cache"] / k).exists() else 1 for k in asked}
            assert 2 in asked.values() and 1 in asked.values()
    finally:
        server.reset()


def test_an_unreachable_cache_fails_closed(world):
    fails_closed(["why-build", world["ref"], "--store", "http://127.0.0.1:9"], "cannot read", "127.0.0.1:9")
    fails_closed(["why-build", world["ref"], "--store", f"file://{world['tmp']}"], "not a Nix binary cache")
    world["server"].status = 500
    try:
        fails_closed(["why-build", world["ref"], "--store", world["server"].url, "--http-connections", "2"],
                     "HTTP 500")
    finally:
        world["server"].reset()


def test_a_target_that_is_not_a_derivation(world, tmp_path):
    (tmp_path / f"{world['tag']}.txt").write_text("not a derivation\n")
    added = subprocess.run(["nix-store", "--add", str(tmp_path / f"{world['tag']}.txt")], capture_output=True,
                           text=True, check=True).stdout.strip()
    fails_closed(["why-build", added, "--store", f"file://{world['cache']}"], "is not a derivation")
    fails_closed(["why-build", world["ref"], "--like", added, "--store", f"file://{world['cache']}"],
                 "is not a derivation")
    fails_closed(["why-build", "/nix/store/" + "a" * 32 + "-gone.drv"], "no such derivation")


def test_an_output_path_stands_for_its_derivation(world, tmp_path):
    drv = subprocess.run(["nix-instantiate", "--expr", f'builtins.derivation {{ name = "built-{world["tag"]}"; '
                          f'system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; }}'],
                         capture_output=True, text=True, check=True).stdout.strip()
    out = subprocess.run(["nix-build", drv, "--no-out-link"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "result").symlink_to(out)
    p = why_build(world, str(tmp_path / "result"), "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["target"] == [drv] and report["build"] == [] and report["fetch"] == []


def test_help_and_a_mistyped_command():
    p = run_cli("why-build", "--help")
    assert p.returncode == 0 and "why-build" in p.stdout and "--like" in p.stdout
    assert "why-build" in run_cli("--help").stdout
    fails_closed(["why-biuld", "x.drv"], "unknown command 'why-biuld'", "did you mean why-build")


def show_derivation(drv: str) -> dict:
    """Nix's own reading of a derivation graph: `nix derivation show` (Nix 2.15
    and newer) or `nix show-derivation` (older)."""
    for command in (["derivation", "show"], ["show-derivation"]):
        p = subprocess.run(["nix", *NIX_FLAGS, *command, "--recursive", drv], capture_output=True, text=True)
        if p.returncode == 0:
            return json.loads(p.stdout)
    raise AssertionError(p.stderr)


def test_the_reader_agrees_with_nix(world):
    from closure_audit.drv.derivation import read_graph

    # The fixture's scripts hold parentheses (`$((i+1))`); a derivation on it whose strings hold none
    # takes the reader's other way.
    target = subprocess.run(["nix-instantiate", "--expr", "--argstr", "tag", world["tag"], "--arg", "variants",
                             str(world["expr"]), f'{{ tag, variants }}: builtins.derivation {{ name = "plain-${{tag}}"; '
                             f'system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; '
                             f'env = import variants {{ inherit tag; zlibPatch = true; }}; }}'],
                            capture_output=True, text=True, check=True).stdout.strip()
    ours = read_graph([target])
    def strings_hold_parentheses(d) -> bool:
        return open(d.path).read().count("(") != 1 + len(d.outputs) + len(d.input_drvs) + len(d.env)
    assert not strings_hold_parentheses(ours[target])
    assert all(strings_hold_parentheses(d) for p, d in ours.items() if p != target)
    theirs = show_derivation(target)
    assert set(ours) == {p if p.startswith("/") else f"/nix/store/{p}" for p in theirs}
    for path, d in theirs.items():
        mine = ours[path if path.startswith("/") else f"/nix/store/{path}"]
        assert {k: v["path"] for k, v in d["outputs"].items()} == mine.outputs
        assert {k: sorted(v) if isinstance(v, list) else sorted(v["outputs"]) for k, v in d["inputDrvs"].items()} \
            == {k: sorted(v) for k, v in mine.input_drvs.items()}
        assert sorted(d["inputSrcs"]) == sorted(mine.input_srcs)
        assert (d["system"], d["builder"], d["args"], d["env"]) == \
            (mine.system, mine.builder, list(mine.args), mine.env)


def test_several_caches_in_priority_order(world, tmp_path):
    """Each path comes from the first cache, by Priority, that has it: here a
    cache given second but asked first, holding cudart alone."""
    first = tmp_path / "first"
    (first / "nar").mkdir(parents=True)
    (first / "nix-cache-info").write_text("StoreDir: /nix/store\nPriority: 10\n")
    cudart = next(p for p in world["closure"] if "cudart" in p and not p.endswith(".drv"))
    info = narinfo(world["cache"], cudart)
    shutil.copy(world["cache"] / f"{os.path.basename(cudart)[:32]}.narinfo", first)
    shutil.copy(world["cache"] / info["URL"], first / info["URL"])
    target = instantiate(world["expr"], world["tag"], caps="8.9")
    full = f"file://{world['cache']}"
    p = run_cli("why-build", target, "--store", full, "--store", f"file://{first}", "--json")
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    assert {f["path"]: f["store"] for f in report["fetch"]} == {
        f["path"]: f"file://{first}" if f["path"] == cudart else full for f in report["fetch"]}
    assert len(report["fetch"]) == 2
    assert names_of(b["drv"] for b in report["build"]) == {"magma-2.9.0", "nccl-2.28.3", "torch-2.9.0",
                                                            "python3-env"}


def test_installables_are_instantiated(world, tmp_path):
    """A flake's attribute, as a user names it, gives the same answer as its .drv."""
    system = subprocess.run(["nix-instantiate", "--eval", "--expr", "builtins.currentSystem"], capture_output=True,
                            text=True, check=True).stdout.strip()
    (tmp_path / "variants.nix").write_text(VARIANTS)
    (tmp_path / "flake.nix").write_text(
        f'{{ outputs = {{ self }}: {{ packages.{system}.narrow = import ./variants.nix '
        f'{{ tag = "{world["tag"]}"; caps = "8.9"; system = {system}; }}; }}; }}\n')
    drv = instantiate(world["expr"], world["tag"], caps="8.9")
    p = why_build(world, f"path:{tmp_path}#narrow", "--json")
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["target"] == [drv]
    fails_closed(["why-build", f"path:{tmp_path}#absent", "--store", f"file://{world['cache']}"], "absent")
