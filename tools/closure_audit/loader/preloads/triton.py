"""Triton (read from 3.9.0's triton/knobs.py and backends/nvidia/driver.py):
the CUPTI its profiler (proton) opens by path, the NVIDIA tools its
compiler runs, and how its driver finds libcuda.so.1 (`ldconfig -p`, which
NixOS cannot answer).

Each is a knob of knobs.py, a variable tried first and a default: the
profiler's `env_str("TRITON_CUPTI_LIB_PATH", DEFAULT)` directory (the
bundled `backends/nvidia/lib/cupti`, whose libcupti.so libproton dlopens),
and each `env_nvidia_tool("NAME")`, `TRITON_<NAME>_PATH` then
`env_nvidia_tool`'s `default_path` (the bundled `backends/nvidia/bin/NAME`),
the first that answers `--version`. With the variables unset, as an audit
takes the environment, the defaults decide: a default read as an absolute
path (a build that points it elsewhere) is taken as written.

On GPUs of capability 10.0 and later proton sets TRITON_CUPTI_LIB_PATH to
`TRITON_CUPTI_LIB_BLACKWELL_PATH`'s default (`lib/cupti-blackwell`, CUPTI
13) unless the user set it; the process here is the older GPUs' (the
GPU is not known from files).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from ...elf.reader import InvalidElf, read_elf
from .common import Listing, Preload, Preloads, function, parse

CUPTI_VARIABLE = "TRITON_CUPTI_LIB_PATH"
BUNDLED_CUPTI = ("backends", "nvidia", "lib", "cupti")  # Triton before the knob's default is read


@dataclass(frozen=True)
class Tool:
    """An NVIDIA tool Triton runs: the variable tried first, then `default`."""

    binary: str  # ptxas, ptxas-blackwell, cuobjdump, nvdisasm
    variable: str  # TRITON_PTXAS_PATH
    default: str  # absolute
    knobs: str  # the knobs.py that says so
    present: bool = False  # a file is there
    interp: str | None = None  # its PT_INTERP, where it is a program that names one


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    """Triton's profiler (proton) opens libcupti.so in the CUPTI directory
    of its knob, by path, not by name."""
    for site in sites:
        knobs = os.path.join(site, "triton", "knobs.py")
        tree = parse(knobs)
        if tree is None or not _names(tree, CUPTI_VARIABLE):
            continue
        directory = _default(tree, CUPTI_VARIABLE, os.path.dirname(knobs))
        directory = directory or os.path.join(site, "triton", *BUNDLED_CUPTI)
        if "libcupti.so" in (listing(directory) or ()):
            out.preloads.append(Preload("triton", f"triton/knobs.py {CUPTI_VARIABLE}", "Triton's profiler (proton)",
                                        "triton", None, os.path.join(directory, "libcupti.so")))


def tools(sites: list[str]) -> list[Tool]:
    """Each `env_nvidia_tool("NAME")` knob of knobs.py, with the file it
    runs when its variable is unset."""
    out = []
    for site in sites:
        knobs = os.path.join(site, "triton", "knobs.py")
        tree = parse(knobs)
        cls = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "env_nvidia_tool"),
                   None) if tree is not None else None
        init = function(cls, "__init__") if cls is not None else None
        where = _default_path(init, os.path.dirname(knobs)) if init is not None else None
        if where is None:
            continue
        for call in _calls(tree, "env_nvidia_tool"):
            binary = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
            if isinstance(binary, str) and binary and "/" not in binary:
                # env_nvidia_tool's key: f"TRITON_{binary.upper().replace('-', '_')}_PATH".
                default = os.path.join(where, binary)
                try:
                    elf = read_elf(default) if os.path.isfile(default) else None
                except (OSError, InvalidElf):
                    elf = None  # unreadable or malformed: its own invalid-elf finding says why
                out.append(Tool(binary, f"TRITON_{binary.upper().replace('-', '_')}_PATH", default, knobs,
                                os.path.isfile(default), elf.interp if elf is not None else None))
    return out


def libcuda_search(sites: list[str]) -> list[tuple[str, str | None]]:
    """Triton's `libcuda_dirs()` (triton/backends/nvidia/driver.py) that runs
    `/sbin/ldconfig -p` to find libcuda.so.1: (the file, the variable that
    skips it, TRITON_LIBCUDA_PATH where driver.py or knobs.py names it)."""
    out = []
    for site in sites:
        driver = os.path.join(site, "triton", "backends", "nvidia", "driver.py")
        tree = parse(driver)
        fn = function(tree, "libcuda_dirs") if tree is not None else None
        if fn is None or not any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "ldconfig" in n.value
                                 for n in ast.walk(fn)):
            continue
        variable = None
        for path in (driver, os.path.join(site, "triton", "knobs.py")):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    if "TRITON_LIBCUDA_PATH" in f.read():
                        variable = "TRITON_LIBCUDA_PATH"
                        break
            except OSError:
                continue
        out.append((driver, variable))
    return out


def _names(tree: ast.AST, variable: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == variable for n in ast.walk(tree))


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def _default(tree: ast.AST, variable: str, here: str) -> str | None:
    """The default directory of the knob `env_*(variable, DEFAULT)`."""
    call = next((c for c in ast.walk(tree) if isinstance(c, ast.Call) and len(c.args) >= 2
                 and isinstance(c.args[0], ast.Constant) and c.args[0].value == variable), None)
    return _path(call.args[1], here) if call is not None else None


def _default_path(init: ast.FunctionDef, here: str) -> str | None:
    """env_nvidia_tool.__init__'s `self.default_path = ...(__file__ ..., binary)`,
    less its last part (the binary): the directory its tools lie in."""
    for node in ast.walk(init):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute)
                and node.targets[0].attr == "default_path"):
            return _path(node.value, here, skip=("binary",))
    return None


def _path(node: ast.expr, here: str, skip: tuple[str, ...] = ()) -> str | None:
    """A path expression: `__file__`'s directory joined with the string
    parts that follow (`os.path.join(os.path.dirname(__file__), "a", "b")`,
    `pathlib.Path(__file__).parent / "a" / "b"`), or an absolute string.
    None for anything else (a name other than `skip`, a call of other input)."""
    parts, anchored = [], False
    for n in _in_order(node):
        if isinstance(n, ast.Name) and n.id == "__file__":
            anchored = True
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            parts.append(n.value)
        elif isinstance(n, ast.Name) and n.id not in skip and n.id not in ("os", "pathlib", "str", "Path"):
            return None
    if anchored and all(p and "/" not in p and p != ".." for p in parts):
        return os.path.join(here, *parts)
    if not anchored and len(parts) == 1 and os.path.isabs(parts[0]):
        return os.path.normpath(parts[0])
    return None


def _in_order(node: ast.AST) -> list[ast.AST]:
    """The node's descendants in source order."""
    found = [n for n in ast.walk(node) if hasattr(n, "lineno")]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))
