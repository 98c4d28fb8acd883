"""Nix store paths as strings: the store directory, hash parts, and names
split the way nixpkgs names its outputs (`pname-version-output`)."""

from __future__ import annotations

import os
import re

HASH_CHARS = "0123456789abcdfghijklmnpqrsvwxyz"  # Nix's base-32 alphabet
HASH_LEN = 32
_BASENAME = re.compile(rf"^[{HASH_CHARS}]{{{HASH_LEN}}}-.+$")
_VERSION_START = re.compile(r"-(?=\d)")
# Release prefixes of package names: cuda12.9-, cuda13-, python3.12-, python3-, pypy3.10-.
_RELEASE_PREFIX = re.compile(r"^((cuda|python|pypy)\d+(?:\.\d+)?)-(?=[^\d])")

# Output names nixpkgs uses for multiple-output derivations; a store name
# ending in -<one of these> is that output of its package.
OUTPUT_NAMES = frozenset({
    "bin", "dev", "lib", "static", "stubs", "doc", "devdoc", "man", "info", "out", "debug",
    "python", "include", "samples", "sample", "tools", "bin_lib", "lib64", "hooks", "modules",
    "cxxdev", "profiling",
})


def store_dir() -> str:
    return os.environ.get("NIX_STORE_DIR", "/nix/store").rstrip("/")


def is_store_basename(name: str) -> bool:
    return bool(_BASENAME.match(name))


def top_store_path(path: str, store: str | None = None) -> str | None:
    """The store path (`/nix/store/<hash>-<name>`) that `path` lies in, or None."""
    store = store or store_dir()
    if not path.startswith(store + "/"):
        return None
    first = path[len(store) + 1:].split("/", 1)[0]
    return f"{store}/{first}" if is_store_basename(first) else None


def hash_part(path: str) -> str:
    return os.path.basename(path)[:HASH_LEN]


def name_part(path: str) -> str:
    """`/nix/store/<hash>-torch-2.9.0-lib` -> `torch-2.9.0-lib`."""
    return path[path.rfind("/") + 1:][HASH_LEN + 1:]  # os.path.basename, without its overhead


def parse_name(name: str) -> tuple[str, str, str]:
    """(pname, version, output) of a store name, as builtins.parseDrvName
    splits name and version (at the first '-' followed by a digit), with a
    trailing output name split off. `out` is the output when none is named."""
    output = "out"
    head, _, tail = name.rpartition("-")
    if head and tail in OUTPUT_NAMES:
        name, output = head, tail
    m = _VERSION_START.search(name)
    if m is None:
        return name, "", output
    return name[:m.start()], name[m.end():], output


def split_release(pname: str) -> tuple[str, str]:
    """(release prefix, the rest) of a package name: ('python3.12', 'numpy').
    A package built for one CUDA or Python release carries the release as a
    prefix; the rest is the package's own name."""
    m = _RELEASE_PREFIX.match(pname)
    return (m.group(1), pname[m.end():]) if m else ("", pname)


def package_key(pname: str) -> tuple[str, str]:
    """What identifies a package across releases: (the prefix's family, the
    rest). `python3.12-numpy` and `python3.13-numpy` are one package; the
    C++ `protobuf` and the Python `python3.12-protobuf` are two."""
    m = _RELEASE_PREFIX.match(pname)
    return (m.group(2), pname[m.end():]) if m else ("", pname)
