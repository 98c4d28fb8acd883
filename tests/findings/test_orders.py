"""findings/orders.py on its own: the union of two frameworks of a venv
built with gcc, in both orders (loader/process.py), judged by judge_orders;
the real loader imports them in each order and /proc/self/maps says which
copy each order gets."""

from __future__ import annotations

import os

import pytest

from audits import venv
from closure_audit.findings.orders import judge_orders
from closure_audit.loader.process import UNION
from resolvedtree import EXT, real_load, resolved_tree, two_frameworks

pytestmark = pytest.mark.fhs


def judged(build):
    tree = resolved_tree(build.root / "venv", processes=True)
    findings = tree.findings()
    (union,) = [p for p in tree.processes if p.name == UNION]
    judge_orders(union, findings, tree.inside)
    return union, findings.sorted()


def test_each_order_gets_the_copy_of_the_framework_imported_first(build):
    _site, made = two_frameworks(build, "int beta_rt = 1;\n")
    (a_lib, a_mod), (b_lib, b_mod) = made["alpha"], made["beta"]
    union, (f,) = judged(build)
    assert union.frameworks == ("alpha", "beta") and union.reverse.frameworks == ("beta", "alpha")
    assert (f.rule, f.severity, f.fields["library"]) == ("import-order-differs", "info", "libcudart.so.13")
    assert f.fields["orders"] == [["alpha", "beta"], ["beta", "alpha"]]
    entries = {e["file"]: (e["first"], e["second"]) for e in f.fields["objects"]}
    assert entries == {str(a_mod): (str(a_lib), str(b_lib)), str(b_mod): (str(a_lib), str(b_lib))}
    first, _ = real_load(a_mod, b_mod)
    second, _ = real_load(b_mod, a_mod)
    assert str(a_lib) in first and str(b_lib) not in first
    assert str(b_lib) in second and str(a_lib) not in second


def test_an_order_that_leaves_a_need_unanswered_is_a_warning(build):
    """beta's module finds libcudss.so.99 only if alpha loaded it first
    (a CUDA library, so both are frameworks, of a release no host has)."""
    site_rel, _site = venv(build.root)
    lib = build.lib(f"{site_rel}/alpha/lib/libcudss.so.99")
    a_mod = build.lib(f"{site_rel}/alpha/_C{EXT}", soname="", links=[lib], runpath=["$ORIGIN/lib"])
    b_mod = build.lib(f"{site_rel}/beta/_C{EXT}", soname="", links=[lib])
    _union, (f,) = judged(build)
    assert (f.rule, f.severity, f.file) == ("import-order-differs", "warning", str(b_mod))
    (e,) = f.fields["objects"]
    assert (e["first"], e["second"]) == (str(lib), None) and "none and fails" in f.message
    assert real_load(a_mod, b_mod)[1] is None
    assert real_load(b_mod, a_mod)[1] is not None


def test_orders_that_agree_say_nothing(build):
    site_rel, _site = venv(build.root)
    for name, lib_name in (("alpha", "libcudss.so.98"), ("beta", "libcutensor.so.98")):
        lib = build.lib(f"{site_rel}/{name}/lib/{lib_name}")
        build.lib(f"{site_rel}/{name}/_C{EXT}", soname="", links=[lib], runpath=["$ORIGIN/lib"])
    union, found = judged(build)
    assert union.reverse is not None and found == []
    assert os.path.isdir(build.root / site_rel)
