"""The report page without a browser: the dominator tree it draws, the data
it carries, that it loads nothing, and how it is written."""

from __future__ import annotations

import glob
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings, strategies as st

from closure_audit.closure.graph import Closure, build_graph
from closure_audit.closure.sizes import added_sizes, dominator_tree
from closure_audit.closure.evidence import Hit
from closure_audit.cuda.libraries import LIBRARIES, install_hint, library_package
from closure_audit.cuda.redist import REDIST_NAMES, is_cuda_redist
from closure_audit.errors import UsageError
from closure_audit.findings.rules import Finding
from closure_audit.output import html
from closure_audit.nix.storepath import name_part
from conftest import run_cli
from reportdata import SHAPE, picture, shape_picture, store_path, synthetic_closure

ROOT = Path(__file__).resolve().parents[2]


# -- the dominator tree ---------------------------------------------------------------

@st.composite
def graphs(draw):
    n = draw(st.integers(1, 9))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    roots = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    entries = {f"/nix/store/{i}": {"nar_size": 10 ** i, "references": sorted(
        {f"/nix/store/{b}" for a, b in edges if a == i and a != b})} for i in range(n)}
    return Closure(build_graph(entries), [f"/nix/store/{r}" for r in roots], "test", "/nix/store")


def _reachable(closure: Closure, without: str | None = None) -> set[str]:
    g = nx.DiGraph()
    g.add_nodes_from(p for p in closure.graph if p != without)
    g.add_edges_from((p, r) for p in g for r in closure.graph.references(p) if r != without)
    seen = set()
    for r in closure.roots:
        if r != without:
            seen |= {r} | nx.descendants(g, r)
    return seen


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_dominator_tree_and_added_sizes_match_their_definitions(closure):
    """d dominates v when no root reaches v once d is gone; the immediate
    dominator is the dominator nearest v; the added size is the NAR size of
    everything a path dominates."""
    reach = _reachable(closure)
    dominated = {d: (reach - _reachable(closure, d)) for d in reach}
    tree = dominator_tree(closure)
    added = added_sizes(closure)
    assert set(tree) == reach == set(added)
    for v in reach:
        strict = [d for d in reach if d != v and v in dominated[d]]
        # the nearest strict dominator is the one all the others dominate
        nearest = [d for d in strict if all(d in dominated[o] for o in strict)]
        assert tree[v] == (nearest[0] if nearest else None)
        assert added[v] == sum(closure.nar_size(u) for u in dominated[v])


# -- CUDA redistributables ----------------------------------------------------------

def test_cuda_redistributables_by_store_name():
    for name in ("cuda13.0-libcublas-13.1.0.3-lib", "cuda12.9-cudnn-9.27.0.1-lib", "libcublas-12.4.5.8-lib",
                 "cuda_cudart-12.4.99", "cuda_nvcc-12.4.99-bin", "cudnn-9.3.0.75", "nccl-2.21.5-1",
                 "cudatoolkit-12.4.1", "cuda13.0-cuda_cccl-13.0.85-dev"):
        assert is_cuda_redist(name), name
    for name in ("glibc-2.40-66", "python3.12-torch-2.9.0-lib", "libnvme-1.9", "cuda-samples-12.4",
                 "magma-2.7.2", "nvidia-x11-550.78", "cudaPackages-helper"):
        assert not is_cuda_redist(name), name


def test_what_ships_each_cuda_library():
    """Each CUDA library names a redistributable of the manifests and the wheel
    redist-features maps to that redistributable."""
    from redist_features.archive import WHEEL_TO_REDIST

    assert library_package("libcudart.so.13") == ("cuda_cudart", "nvidia-cuda-runtime")
    assert library_package("libcusparseLt.so.0") == ("libcusparse_lt", "nvidia-cusparselt-cuXX")
    assert library_package("libcusparse.so.12")[0] == "libcusparse"
    assert library_package("libnvrtc-builtins.so.13.0")[0] == "cuda_nvrtc"
    assert library_package("libfoo.so.1") is None and "wheel or redistributable" in install_hint("libfoo.so.1")
    assert install_hint("libcublas.so.13") == ("the nvidia-cublas wheel (nvidia-cublas-cu12 for CUDA 12) or the "
                                               "libcublas redistributable")
    for lib in LIBRARIES:
        assert lib.redist in REDIST_NAMES, lib.redist
        dist = lib.wheel.removesuffix("-cuXX").replace("-", "_")
        assert WHEEL_TO_REDIST.get(dist, lib.redist) == lib.redist, lib.wheel


@pytest.mark.skipif(not (ROOT / "pkgs").is_dir(), reason="a source tree without pkgs/ (the Nix package's check)")
def test_every_manifest_entry_is_a_cuda_redistributable():
    manifests = glob.glob(str(ROOT / "pkgs/cuda/manifests/*.json"))
    assert manifests
    for m in manifests:
        entries = {k for k, v in json.loads(Path(m).read_text()).items() if isinstance(v, dict)}
        assert entries and entries <= REDIST_NAMES, sorted(entries - REDIST_NAMES)


# -- the page's data and markup ----------------------------------------------------

class _Markup(HTMLParser):
    def __init__(self):
        super().__init__()
        self.attrs: list[tuple[str, str, str | None]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self._in = None

    def handle_starttag(self, tag, attrs):
        self.attrs += [(tag, k, v) for k, v in attrs]
        self._in = (tag, dict(attrs))

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in and self._in[0] == "script":
            self.scripts.append((self._in[1], data))
        elif self._in and self._in[0] == "style":
            self.styles.append(data)
        else:
            self.text.append(data)


def _parse(text: str) -> _Markup:
    m = _Markup()
    m.feed(text)
    return m


def _data(text: str) -> dict:
    m = _parse(text)
    [block] = [body for attrs, body in m.scripts if attrs.get("id") == "closure-data"]
    return json.loads(block)


def test_the_data_holds_every_path_with_its_sizes_dominator_and_references():
    p = shape_picture()
    [d] = _data(html.render([p], "report"))["pictures"]
    paths = [d["store"] + n for n in d["names"]]
    assert set(paths) == set(p.closure.graph) and paths[0] == store_path("app-1.0") and d["roots"] == [0]
    for i, path in enumerate(paths):
        assert d["nar"][i] == SHAPE[name_part(path)][0]
        assert d["added"][i] == p.added[path]
        dom = p.dominators[path]
        assert d["dom"][i] == (-1 if dom is None else paths.index(dom))
        assert sorted(paths[r] for r in d["refs"][i]) == sorted(p.closure.graph.references(path))
    kinds = {name_part(x): k for x, k in zip(paths, d["kind"])}
    assert kinds["magma-2.7.2"] == html.FORBIDDEN
    assert kinds["cuda13.0-libcublas-13.1.0.3-lib"] == kinds["cuda13.0-cuda_cudart-13.0.96-lib"] == html.CUDA
    assert kinds["glibc-2.40-66"] == kinds["torch-2.9.0-lib"] == html.OTHER
    assert d["closure"] is None  # no closureSize in the dump: the page sums it on demand
    assert p.dominators[store_path("cuda13.0-libcublas-13.1.0.3-lib")] == store_path("torch-2.9.0-lib")
    assert p.dominators[store_path("libgfortran-13.2.0-lib")] == store_path("magma-2.7.2")


def test_the_summary_and_the_forbidden_chains_are_in_the_markup():
    text = html.render([shape_picture()], "report")
    body = " ".join(_parse(text).text)
    assert "closure size" in body and "932.1 MiB" in body  # every NAR size added up
    assert "largest added sizes" in body
    assert "torch-2.9.0-lib" in body and "854.0 MiB" in body  # torch, cuBLAS, cudart, magma, libgfortran
    [finding] = re.findall(r'<li class="finding [^"]*" data-forbidden="([^"]+)">', text)
    assert finding == store_path("magma-2.7.2")
    chain = text[text.index('data-forbidden="'):]
    for hop in ("app-1.0", "torch-2.9.0-lib", "magma-2.7.2"):
        assert store_path(hop) in chain and hop in chain
    assert "evidence unavailable: not present in the local store" in chain


def test_the_page_loads_nothing_and_its_data_cannot_escape():
    """No URL in src, href, url() or imports; a Content-Security-Policy that
    forbids loading; evidence that holds '</script>' and URLs stays text."""
    p = shape_picture()
    hostile = Hit("lib/x.so", 16, "text", '</script><script src="https://cdn.example/x.js"></script>'
                                          "<!-- //cdn.example/y url(https://e.example) ///x")
    hop = {"from": p.closure.roots[0], "to": store_path("zlib-1.3.1"), "evidence": [hostile.to_json()],
           "evidence_total": 1}
    p.findings.append(Finding("forbidden-path", "error", "zlib", store_path("zlib-1.3.1"),
                              {"reason": "test", "chain": [hop["from"], hop["to"]], "hops": [hop]}))
    text = html.render([p], "report")
    m = _parse(text)
    assert [a for a in m.attrs if a[1] in ("src", "href", "action", "srcset", "poster", "data", "style")] == []
    assert len(m.scripts) == 2 and text.count("<script") == 2 and "<!--" not in text
    code = html._asset("report.js") + html._asset("report.css")
    assert not re.search(r"url\(|@import|\bimport\s*\(|\bfetch\s*\(|XMLHttpRequest|WebSocket|EventSource|"
                         r"https?:|\.src\b|\.href\b|//[\w.-]+\.[a-z]{2,}", code, re.I)
    assert "//" not in text.replace(html._asset("report.js"), "")  # no URL outside the script
    assert "default-src 'none'" in text
    [finding] = [f for f in _data(text)["pictures"][0]["names"] if f.endswith("zlib-1.3.1")]
    assert finding  # the data still parses
    assert "cdn.example" in " ".join(m.text)  # the evidence is shown, as text


def test_a_page_for_10000_paths_is_under_8_megabytes():
    text = html.render([picture(synthetic_closure(10_000))], "report")
    assert len(text.encode()) < 8 * 10**6


# -- writing -----------------------------------------------------------------------

def test_the_page_is_written_whole(tmp_path):
    out = tmp_path / "report.html"
    mask = os.umask(0o022)
    try:
        html.write(str(out), "<!DOCTYPE html>one")
    finally:
        os.umask(mask)
    assert out.read_text() == "<!DOCTYPE html>one" and out.stat().st_mode & 0o777 == 0o644
    out.chmod(0o640)
    html.write(str(out), "<!DOCTYPE html>two")
    assert out.read_text() == "<!DOCTYPE html>two" and out.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


@pytest.mark.parametrize("where", ["missing-dir/report.html", "a-file/report.html", "."])
def test_a_page_that_cannot_be_written_is_a_one_line_error(tmp_path, where):
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(UsageError) as err:
        html.check_writable(str(tmp_path / where))
    assert "cannot write the report to" in str(err.value) and "\n" not in str(err.value)


# -- the command on a saved dump ---------------------------------------------------

def test_report_of_a_dump_with_a_policy(tmp_path):
    dump = tmp_path / "closure.json"
    dump.write_text(json.dumps({store_path(n): {"narSize": nar, "references": [store_path(r) for r in refs]}
                                for n, (nar, refs) in SHAPE.items()}))
    policy = tmp_path / "policy.toml"
    policy.write_text('[forbidden]\npatterns = ["zlib-*"]\n')
    out = tmp_path / "report.html"
    p = run_cli("report", str(dump), "--policy", str(policy), "-o", str(out))
    assert p.returncode == 1, p.stderr
    assert p.stdout == f"closure-audit report: wrote {out}: 10 paths, 2 forbidden\n"
    text = out.read_text()
    assert set(re.findall(r'data-forbidden="([^"]+)"', text)) == {store_path("magma-2.7.2"), store_path("zlib-1.3.1")}
    assert len(_data(text)["pictures"][0]["names"]) == 10
    policy.write_text('[forbidden]\ndefaults = false\n')
    p = run_cli("report", str(dump), "--policy", str(policy), "-o", str(out))
    assert p.returncode == 0 and "0 forbidden" in p.stdout
    p = run_cli("report", "--path-info", str(tmp_path / "gone.json"), "-o", str(out))
    assert p.returncode == 2 and p.stderr == f"closure-audit: error: path-info dump not found: {tmp_path}/gone.json\n"
