"""Which output a file of a redistributable belongs to.

The same rules are implemented in bash by hooks/split-redist-outputs.sh, which
moves the files at build time; tests check that the two agree on real
archives. Paths are relative to the package root: a tarball's top directory
or a wheel's `nvidia/<component>/` prefix removed.
"""

from __future__ import annotations

import fnmatch

OUTPUTS = ("bin", "lib", "static", "dev", "stubs", "doc", "samples")

_SHARED = ("*.so", "*.so.*")
_HEADERS = ("*.h", "*.hh", "*.hpp", "*.hxx", "*.cuh", "*.inl")


def output_of(path: str, kind: str, executable: bool) -> str | None:
    """The output `path` goes to, or None when it stays in `out`. `kind` is
    "file", "link" or "dir"; directories themselves go nowhere."""
    if kind == "dir":
        return None
    parts = path.split("/")
    name = parts[-1]
    top = parts[0]
    if "stubs" in parts[:-1]:
        return "stubs"
    if "samples" in parts[:-1] or "sample" in parts[:-1]:
        return "samples"
    if top in ("doc", "docs", "man") or path.startswith(("share/doc/", "share/man/", "share/info/")):
        return "doc"
    if (top == "include" or any(fnmatch.fnmatchcase(name, p) for p in _HEADERS)
            or path.startswith(("lib/pkgconfig/", "lib64/pkgconfig/", "share/pkgconfig/", "pkg-config/",
                                "pkgconfig/", "lib/cmake/", "lib64/cmake/", "share/cmake/"))
            or name.endswith(".cmake")):
        return "dev"
    if name.endswith(".a"):
        return "static"
    if top in ("lib", "lib64") and any(fnmatch.fnmatchcase(name, p) for p in _SHARED):
        return "lib"
    if top == "bin" and (executable or kind == "link"):
        return "bin"
    return None
