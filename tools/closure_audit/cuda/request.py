"""The GPUs a build is meant for: CUDA capabilities and forward compatibility,
from the command line, a policy's [gpu] table, or a nixpkgs config file (the
`cudaCapabilities` and `cudaForwardCompat` options the overlay reads)."""

from __future__ import annotations

import json
import os
import re
from collections import namedtuple

from ..errors import UsageError
from .code import capability_table, parse_capability


class Request(namedtuple("Request", "capabilities forward_compat source")):
    """The capabilities a build was meant for, as written ("8.6", "9.0a",
    "10.0f"), whether PTX must serve newer GPUs, and where they came from."""

    __slots__ = ()

    @property
    def devices(self) -> list[tuple[int, int]]:
        """The GPUs asked for, without the a/f variants, lowest first."""
        return sorted({parse_capability(c)[:2] for c in self.capabilities})


def make_request(capabilities: list[str], forward_compat: bool, source: str) -> Request:
    """A checked request: every capability known to CUDA, at least one."""
    caps = [c.strip() for c in capabilities if c.strip()]
    if not caps:
        raise UsageError(f"{source}: no CUDA capability given (write 8.6,9.0)")
    known = capability_table()
    for c in caps:
        try:
            major, minor, variant = parse_capability(c)
        except ValueError as exc:
            raise UsageError(f"{source}: {exc}") from None
        if f"{major}.{minor}" not in known:
            raise UsageError(f"{source}: {c} is not a CUDA capability (known: {', '.join(known)})")
        if variant and variant not in known[f"{major}.{minor}"]["variants"]:
            raise UsageError(f"{source}: {major}.{minor} has no '{variant}' variant")
    return Request(tuple(dict.fromkeys(caps)), forward_compat, source)


def config_file() -> str | None:
    """The nixpkgs config file nixpkgs itself would read, in its order."""
    home = os.environ.get("HOME", "")
    candidates = [os.environ.get("NIXPKGS_CONFIG", "")]
    if home:
        candidates += [os.path.join(home, ".config/nixpkgs/config.nix"), os.path.join(home, ".nixpkgs/config.nix")]
    return next((c for c in candidates if c and os.path.exists(c)), None)


# A config may be a function of { pkgs }; the CUDA options never need pkgs.
_READ_CONFIG = """
{ file }:
let
  raw = import file;
  config = if builtins.isFunction raw then raw { pkgs = throw "the config's CUDA options depend on pkgs"; } else raw;
in {
  capabilities = config.cudaCapabilities or null;
  forwardCompat = config.cudaForwardCompat or true;
}
"""


def from_nix_config(file: str | None) -> Request:
    """The request a nixpkgs config makes, evaluated by nix-instantiate.
    A config without cudaCapabilities is an error: the default set depends on
    the CUDA release, which the binaries do not name."""
    from ..nix.command import find, run  # shutil and subprocess: only for a nixpkgs config (start-up: cli.py)

    path = file or config_file()
    if path is None:
        raise UsageError("--from-nix-config: no nixpkgs config found "
                         "($NIXPKGS_CONFIG, ~/.config/nixpkgs/config.nix); name one: --from-nix-config FILE")
    if not os.path.isfile(path):
        raise UsageError(f"--from-nix-config: not a file: {path}")
    tool = find("nix-instantiate", UsageError, "for --from-nix-config")
    cmd = [tool, "--eval", "--strict", "--json", "--expr", _READ_CONFIG, "--arg", "file", os.path.abspath(path)]
    data = json.loads(run(cmd, f"--from-nix-config: cannot evaluate {path}", UsageError))
    caps, fwd = data["capabilities"], data["forwardCompat"]
    source = f"nixpkgs config {path}"
    if caps is None:
        raise UsageError(f"{source} sets no cudaCapabilities; pass --capabilities")
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise UsageError(f"{source}: cudaCapabilities must be a list of strings")
    if not isinstance(fwd, bool):
        raise UsageError(f"{source}: cudaForwardCompat must be true or false")
    return make_request(caps, fwd, source)


def parse_gpus(text: str, source: str = "--gpu") -> list[tuple[int, int]]:
    """The GPUs of `--gpu 8.9,9.0` (also `sm_89`), each a capability CUDA
    knows, as (major, minor); UsageError naming the first that is not."""
    known = capability_table()
    out = []
    for item in (i.strip() for i in text.split(",")):
        m = re.fullmatch(r"sm_(\d+)(\d)", item)
        cap = f"{int(m[1])}.{m[2]}" if m else item
        if not re.fullmatch(r"\d+\.\d+", cap) or cap not in known:
            raise UsageError(f"{source}: {item!r} is not a GPU's CUDA capability (write 8.9 or sm_89; known: "
                             f"{', '.join(known)})")
        major, minor, _ = parse_capability(cap)
        if (major, minor) not in out:
            out.append((major, minor))
    return out
