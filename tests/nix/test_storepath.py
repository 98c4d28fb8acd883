"""Store names split the way nixpkgs names outputs, and sizes in and out."""

from __future__ import annotations

import pytest

from closure_audit.nix.storepath import parse_name, top_store_path
from closure_audit.util import format_size, parse_size


@pytest.mark.parametrize("name, expected", [
    ("torch-2.9.0", ("torch", "2.9.0", "out")),
    ("python3.13-torch-2.9.0-lib", ("python3.13-torch", "2.9.0", "lib")),
    ("cuda13.0-libcublas-13.1.0.3-static", ("cuda13.0-libcublas", "13.1.0.3", "static")),
    ("cuda13.0-libcublas-13.1.0.3", ("cuda13.0-libcublas", "13.1.0.3", "out")),
    ("glibc-2.40-66-bin", ("glibc", "2.40-66", "bin")),
    ("hello", ("hello", "", "out")),
    ("source", ("source", "", "out")),
    ("gcc-wrapper-14.3.0", ("gcc-wrapper", "14.3.0", "out")),
    ("nccl-2.21.5-static", ("nccl", "2.21.5", "static")),
    ("libdrm-2.4.124-dev", ("libdrm", "2.4.124", "dev")),
])
def test_parse_name(name, expected):
    assert parse_name(name) == expected


def test_top_store_path():
    h = "a" * 32
    assert top_store_path(f"/nix/store/{h}-x/lib/libfoo.so", "/nix/store") == f"/nix/store/{h}-x"
    assert top_store_path("/nix/store/not-a-hash/lib", "/nix/store") is None
    assert top_store_path("/usr/lib", "/nix/store") is None


@pytest.mark.parametrize("text, n", [
    (1024, 1024), ("6 GiB", 6 << 30), ("6GiB", 6 << 30), ("500 MB", 500_000_000), ("1.5G", 3 << 29),
    ("0 B", 0), ("7", 7),
])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["lots", "-5 MB", "5 parsecs", True, -1, 1.5, None])
def test_bad_sizes(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_size():
    assert format_size(3 << 30) == "3.0 GiB" and format_size(512) == "512 B"
    assert format_size(-(5 << 20), signed=True) == "-5.0 MiB" and format_size(0, signed=True) == "±0 B"
