"""findings/symbols.py on its own: loader/symbols.py's records in,
findings out; and on a tree built with gcc whose library was replaced by one
without the symbol version its user needs, the finding against the real
loader's refusal."""

from __future__ import annotations

import pytest

from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.findings.symbols import judge_tables, judge_undefined, judge_versions
from closure_audit.loader import symbols as sym
from closure_audit.modes import TREE
from conftest import shared_object
from resolvedtree import real_load, resolved_tree


def collect(judge, records) -> list:
    findings = Findings(Policy(), TREE, ("/t",))
    judge(records, findings)
    return findings.sorted()


def test_a_missing_version_names_what_the_provider_has():
    (f,) = collect(judge_versions, [sym.MissingVersion("/t/libuser.so", "libp.so.1", "/t/libp.so.1", "P_2.0",
                                                       "P_1.0")])
    assert (f.rule, f.severity, f.file) == ("symbol-version-missing", "error", "/t/libuser.so")
    assert (f.fields["needed"], f.fields["version"], f.fields["provider"], f.fields["newest"]) == (
        "libp.so.1", "P_2.0", "/t/libp.so.1", "P_1.0")
    assert "has up to P_1.0" in f.message
    (f,) = collect(judge_versions, [sym.MissingVersion("/t/libuser.so", "libp.so.1", "/t/libp.so.1", "P_2.0", None)])
    assert "defines no version of that family" in f.message


def test_an_undefined_symbol_and_what_would_define_it():
    records = [sym.Undefined("/t/libm.so", "cublasCreate_v2", "libcublas.so.13", "/t/_C.so", "/t/libcublas.so.13"),
               sym.Undefined("/t/_C.so", "f", None, "/t/_C.so", None)]
    by_file = {f.file: f for f in collect(judge_undefined, records)}
    loaded = by_file["/t/libm.so"]
    assert loaded.fields["symbol"] == "cublasCreate_v2" and loaded.fields["provider"] == "/t/libcublas.so.13"
    assert "cublasCreate_v2@libcublas.so.13" in loaded.message and "loaded by _C.so" in loaded.message
    assert "only after /t/libcublas.so.13 is loaded" in loaded.message
    alone = by_file["/t/_C.so"]
    assert "no file of the tree defines it" in alone.message and "loaded by" not in alone.message


def test_unreadable_tables_cannot_decide():
    (f,) = collect(judge_tables, {"/t/bad.so": "its .gnu.version_r runs past the end"})
    assert (f.rule, f.severity, f.fields["reason"]) == ("invalid-elf", "warning", "its .gnu.version_r runs past the end")


@pytest.mark.fhs
def test_a_provider_without_the_version_against_the_real_loader(build, tmp_path):
    script = tmp_path / "v2.map"
    script.write_text("P_1.0 { global: p1; local: *; };\nP_2.0 { global: p2; } P_1.0;\n")
    provider = shared_object(build.root / "lib/libp.so.1", "int p1(void) { return 1; }\nint p2(void) { return 2; }\n",
                             "-Wl,-soname,libp.so.1", f"-Wl,--version-script={script}")
    user = shared_object(build.root / "lib/libuser.so", "int p2(void);\nint use(void) { return p2(); }\n",
                         "-Wl,--no-as-needed", str(provider), "-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags")
    assert real_load(user)[1] is None
    # The provider as an older release builds it: P_1.0 only.
    script.write_text("P_1.0 { global: p1; p2; local: *; };\n")
    shared_object(provider, "int p1(void) { return 1; }\nint p2(void) { return 2; }\n", "-Wl,-soname,libp.so.1",
                  f"-Wl,--version-script={script}")
    tree = resolved_tree(build.root)
    tables = sym.Tables(tree.loader.files)
    try:
        findings = tree.findings()
        judge_versions(sym.missing_versions(sym.bound_needs(tree.resolved.chains), tables), findings)
    finally:
        tables.close()
    (f,) = findings.sorted()
    assert (f.file, f.fields["version"], f.fields["newest"]) == (str(user), "P_2.0", "P_1.0")
    _maps, error = real_load(user)
    assert error is not None and "P_2.0" in error and "not found" in error
