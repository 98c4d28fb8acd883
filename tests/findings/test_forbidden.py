"""findings/forbidden.py on its own: which paths of a closure the policy
forbids (forbidden_matches, from the graph already read), and the
`forbidden-path` findings made of the explanations the caller scanned
(forbidden_findings): it scans nothing itself."""

from __future__ import annotations

import pytest

import synthetic
from closure_audit.closure.evidence import Evidence, Hit, Scanner
from closure_audit.closure.graph import Closure, build_graph, parse_path_info
from closure_audit.closure.why import Explanation, Hop, explain
from closure_audit.findings.collector import Findings
from closure_audit.findings.forbidden import forbidden_findings, forbidden_matches
from closure_audit.findings.policy import FORBIDDEN, Policy
from closure_audit.policy.load import parse_policy

MiB = 1 << 20
# app -> torch -> magma -> libgfortran; app -> gcc-wrapper; torch -> cudatoolkit-static.
SHAPE = {
    "app-1.0": (MiB, ["torch-2.9.0-lib", "gcc-wrapper-14.2.0"]),
    "torch-2.9.0-lib": (300 * MiB, ["magma-2.7.2", "cudatoolkit-12.4.1-static"]),
    "magma-2.7.2": (150 * MiB, ["libgfortran-13.2.0-lib"]),
    "libgfortran-13.2.0-lib": (3 * MiB, []),
    "gcc-wrapper-14.2.0": (MiB, []),
    "cudatoolkit-12.4.1-static": (2 * MiB, []),
}


def path_of(store: str, name: str) -> str:
    return f"{store}/{synthetic.fake_hash(name, 3)}-{name}"


def closure_of(store: str = "/nix/store", shape=SHAPE) -> Closure:
    data = {path_of(store, n): {"narSize": nar, "references": [path_of(store, r) for r in refs]}
            for n, (nar, refs) in shape.items()}
    return Closure(build_graph(parse_path_info(data, store, "test")), [path_of(store, "app-1.0")], "test", store)


def by_name(matches: dict) -> dict:
    return {p.split("-", 1)[1]: m for p, m in matches.items()}


def test_the_default_policy_forbids_by_store_name():
    matches = by_name(forbidden_matches(closure_of(), Policy()))
    assert matches == {"magma-2.7.2": ("magma-*", dict(FORBIDDEN)["magma-*"]),
                       "gcc-wrapper-14.2.0": ("gcc-wrapper-*", "a C/C++ compiler wrapper"),
                       # the first pattern that matches names it
                       "cudatoolkit-12.4.1-static": ("cudatoolkit-*", "the monolithic CUDA toolkit")}


def test_the_policy_adds_allows_and_drops_the_defaults():
    closure = closure_of()
    policy = parse_policy({"forbidden": {"patterns": ["libgfortran-*"], "allow": ["magma-*", "gcc-wrapper-*"]}})
    assert set(by_name(forbidden_matches(closure, policy))) == {"libgfortran-13.2.0-lib",
                                                                 "cudatoolkit-12.4.1-static"}
    assert by_name(forbidden_matches(closure, parse_policy({"forbidden": {"defaults": False}}))) == {}
    # What an old closure had already is not news (diff).
    old = forbidden_matches(closure, Policy())
    assert forbidden_matches(closure, Policy(), exclude=old) == {}
    magma = path_of("/nix/store", "magma-2.7.2")
    assert set(forbidden_matches(closure, Policy(), exclude={magma})) == set(old) - {magma}


def explanation(path: str, chain: list[str], hits: list[Hit], referrers=()) -> Explanation:
    evidence = Evidence()
    for h in hits:
        evidence.add(h)
    hops = [Hop(a, b, evidence if b == path else Evidence()) for a, b in zip(chain, chain[1:])]
    return Explanation(path=path, pattern="magma-*", reason="magma's shared libraries", chain=chain, hops=hops,
                       referrers=list(referrers))


def test_each_explanation_is_one_finding_with_its_size_chain_and_last_hop():
    store = "/nix/store"
    app, torch, magma = (path_of(store, n) for n in ("app-1.0", "torch-2.9.0-lib", "magma-2.7.2"))
    e = explanation(magma, [app, torch, magma], [Hit("lib/libtorch_cuda.so", 4096, "runpath-used", "ctx")])
    findings = Findings(Policy(), "nix-store")
    assert forbidden_findings([e], {magma: 150 * MiB}, findings, target="torch") == [e]
    (f,) = findings.sorted()
    assert (f.rule, f.severity, f.file) == ("forbidden-path", "error", magma)
    assert f.message == ("magma-2.7.2 is in the closure (magma's shared libraries), adding 150.0 MiB; "
                         "reached in 2 hops; last hop: runpath-used in lib/libtorch_cuda.so")
    assert (f.fields["added_size"], f.fields["chain"], f.fields["target"]) == (150 * MiB, [app, torch, magma],
                                                                                 "torch")
    assert [h["from"] for h in f.fields["hops"]] == [app, torch]
    assert f.fields["hops"][1]["evidence"][0]["offset"] == 4096 and "referrers" not in f.fields


def test_the_policy_sets_the_severity_and_no_size_given_is_zero():
    magma = path_of("/nix/store", "magma-2.7.2")
    e = explanation(magma, [magma], [])
    findings = Findings(parse_policy({"severity": {"forbidden-path": "warning"}}), "nix-store")
    forbidden_findings([e], {}, findings)
    (f,) = findings.sorted()
    assert (f.severity, f.fields["added_size"]) == ("warning", 0)
    assert f.message.endswith("adding 0 B; reached in 0 hops")
    off = Findings(parse_policy({"severity": {"forbidden-path": "off"}}), "nix-store")
    forbidden_findings([e], {}, off)
    assert off.sorted() == []


@pytest.mark.fhs
def test_evidence_the_caller_scans_in_a_store_reaches_the_finding(build, tmp_path):
    """A real store on disk: torch's library, built by gcc, holds magma's
    directory in its runpath and needs magma's library. The caller scans
    (closure.why.explain with the store's Scanner); the finding names the
    runpath entry that holds the reference."""
    store = str(build.root / "store")
    magma = path_of(store, "magma-2.7.2")
    torch = path_of(store, "torch-2.9.0-lib")
    lib = build.lib(f"store/{magma.rsplit('/', 1)[1]}/lib/libmagma.so.2")
    build.lib(f"store/{torch.rsplit('/', 1)[1]}/lib/libtorch_cuda.so", links=[lib], runpath=[f"{magma}/lib"])
    shape = {"torch-2.9.0-lib": (MiB, ["magma-2.7.2"]), "magma-2.7.2": (MiB, [])}
    closure = Closure(closure_of(store, shape).graph, [torch], "test", store)
    matches = forbidden_matches(closure, Policy())
    assert list(matches) == [magma]
    explanations = explain(closure, matches, scanner=Scanner(store))
    findings = Findings(Policy(), "nix-store")
    forbidden_findings(explanations, {magma: 5}, findings)
    (f,) = findings.sorted()
    assert f.message.endswith("reached in 1 hop; last hop: runpath-used in lib/libtorch_cuda.so")
    (hit,) = f.fields["hops"][0]["evidence"]
    assert (hit["kind"], hit["entry"]) == ("runpath-used", f"{magma}/lib")
    # Nothing forbidden: nothing explained, nothing scanned.
    scanner = Scanner(store)
    assert explain(closure, {}, scanner=scanner) == [] and scanner.bytes_scanned == 0
