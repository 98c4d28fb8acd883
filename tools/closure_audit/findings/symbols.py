"""Judge what glibc checks once the files are found: the versions each
need requires (symbol-version-missing) and, with `audit --symbols`, the
undefined symbols of objects bound at load time (undefined-symbol).

Takes: loader/symbols.py's MissingVersion and Undefined records, and the
tables that could not be read. Gives: symbol-version-missing,
undefined-symbol and invalid-elf findings.
"""

from __future__ import annotations

import os

from .collector import Findings


def judge_versions(missing, findings: Findings) -> None:
    """`missing`: loader/symbols.py's MissingVersion records."""
    for m in missing:
        has = f"has up to {m.newest}" if m.newest else "defines no version of that family"
        findings.add("symbol-version-missing", m.object,
                     f"version {m.version} of {m.needed} not found: {m.file} {has}, and "
                     f"{os.path.basename(m.object)} needs {m.version} (glibc refuses to load it)",
                     needed=m.needed, version=m.version, provider=m.file, newest=m.newest)


def judge_undefined(undefined, findings: Findings) -> None:
    """`undefined`: loader/symbols.py's Undefined records."""
    for u in undefined:
        symbol = f"{u.symbol}@{u.version}" if u.version else u.symbol
        where = (f"; it loads only after {u.provider} is loaded (RTLD_GLOBAL), which defines it" if u.provider
                 else "; no file of the tree defines it")
        via = "" if u.root == u.object else f", loaded by {os.path.basename(u.root)}"
        findings.add("undefined-symbol", u.object,
                     f"undefined symbol {symbol}: nothing in its load scope defines it{via}{where}",
                     symbol=u.symbol, version=u.version, root=u.root, provider=u.provider)


def judge_tables(problems: dict[str, str], findings: Findings) -> None:
    """Version or symbol tables that cannot be read: the check of that file
    cannot decide."""
    for path, reason in sorted(problems.items()):
        findings.add("invalid-elf", path, f"its symbol or version tables cannot be read: {reason}", reason=reason)
