"""Nix derivations (`.drv` files) and the graph of their input derivations.

A `.drv` file is one ATerm term:

  Derive([("out","/nix/store/…-x","","")],            outputs: name, path, hash algo, hash
         [("/nix/store/…-y.drv",["out","dev"])],       input derivations and the outputs used
         ["/nix/store/…-builder.sh"],                  input sources
         "x86_64-linux","/bin/sh",["-e","…"],          system, builder, args
         [("name","x"),("out","/nix/store/…-x")])      environment

Strings escape only `"`, `\\`, newline, carriage return and tab, as JSON
strings do; so the term becomes JSON by turning its parentheses into
brackets, and the C JSON parser reads it. Where no string holds a
parenthesis (the term's count of them is then exactly its tuples'), every
parenthesis is turned at once (str.translate); otherwise only those outside
strings are. The files are read directly; benchmarks/bench_why_build.py
measures this against `nix derivation show --recursive`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from ..errors import ClosureError
from ..nix.command import nix
from ..nix.storepath import name_part, store_dir, top_store_path
from ..targets import is_installable, nowhere

# A string (kept as it is) or a parenthesis (made a bracket).
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[()]')
_BRACKET = {"(": "[", ")": "]"}
_BRACKETS = str.maketrans(_BRACKET)


@dataclass(frozen=True, kw_only=True)
class Derivation:
    path: str
    outputs: dict[str, str]  # output name -> store path ("" for content-addressed outputs)
    input_drvs: dict[str, tuple[str, ...]]  # .drv path -> the outputs used
    input_srcs: tuple[str, ...]
    system: str
    builder: str
    args: tuple[str, ...]
    env: dict[str, str]

    @property
    def name(self) -> str:
        return self.env.get("name") or name_part(self.path).removesuffix(".drv")

    def substitutes_allowed(self) -> bool:
        """Nix's `allowSubstitutes` attribute: false (written as "") keeps
        the outputs from being substituted."""
        return self.env.get("allowSubstitutes", "1") != ""


class DerivationError(ClosureError):
    pass


def parse_derivation(text: str, path: str) -> Derivation:
    """One `.drv` file's text; DerivationError when it is not a derivation."""
    if not text.startswith("Derive("):
        raise DerivationError(f"{path} is not a derivation (no Derive(...) term)")
    body = text[6:]
    try:
        outputs, inputs, srcs, system, builder, args, env = json.loads(body.translate(_BRACKETS), strict=False)
        tuples = 1 + len(outputs) + len(inputs) + len(env)
        if body.count("(") != tuples or body.count(")") != tuples:  # a string holds one: turn only the others
            outputs, inputs, srcs, system, builder, args, env = json.loads(
                _TOKEN.sub(lambda m: _BRACKET.get(m[0], m[0]), body), strict=False)
        drv = Derivation(
            path=path,
            outputs={_str(o[0]): _str(o[1]) for o in outputs},
            input_drvs={_str(d): tuple(map(_str, outs)) for d, outs in inputs},
            input_srcs=tuple(map(_str, srcs)), system=_str(system), builder=_str(builder), args=tuple(map(_str, args)),
            env={_str(k): _str(v) for k, v in env})
    except (ValueError, TypeError, IndexError) as exc:
        raise DerivationError(f"{path} is not a derivation Nix wrote ({exc})") from None
    if not drv.outputs:
        raise DerivationError(f"{path} is not a derivation Nix wrote (it has no outputs)")
    return drv


def _str(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, found {type(value).__name__}")
    return value


def read_derivation(path: str) -> Derivation:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except FileNotFoundError:
        raise DerivationError(f"{path}: no such derivation in the local store (instantiate it first)") from None
    except OSError as exc:
        raise DerivationError(f"cannot read {path}: {exc.strerror}") from None
    return parse_derivation(text, path)


def read_graph(roots: list[str]) -> dict[str, Derivation]:
    """Every derivation the roots depend on through their input derivations,
    by path, the first root first."""
    graph: dict[str, Derivation] = {}
    todo = list(reversed(dict.fromkeys(roots)))
    seen = set(todo)
    while todo:
        drv = read_derivation(todo.pop())
        graph[drv.path] = drv
        for dep in drv.input_drvs:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return graph


def instantiate(target: str) -> str:
    """The .drv path of a target: a .drv store path, or an installable
    (`.#python3Packages.torch`, `nixpkgs#hello`) instantiated without building
    it (`nix path-info --derivation`). An output path (a `result` link)
    stands for the derivation that made it, where that is known here."""
    store = store_dir()
    if os.path.lexists(target) or target.startswith(store + "/"):
        path = os.path.realpath(target) if os.path.lexists(target) else target
        if top_store_path(path, store) != path:
            raise DerivationError(f"{target} is not a derivation (give a .drv store path or an installable)")
        if not path.endswith(".drv"):
            path = _deriver(target, path)
        if not os.path.isfile(path):
            raise DerivationError(f"{target}: no such derivation in the local store")
        return path
    if not is_installable(target):
        raise nowhere(target)
    out = nix("path-info", "--derivation", target, what=f"instantiating {target}").split()
    if len(out) != 1 or not out[0].endswith(".drv"):
        raise DerivationError(f"{target} is not a derivation (nix path-info --derivation gives "
                              f"{' '.join(out) or 'nothing'})")
    return out[0]


def _deriver(target: str, path: str) -> str:
    from ..nix.command import find, run

    tool = find("nix-store", error=DerivationError, why="to find the derivation of an output path")
    drv = run([tool, "--query", "--deriver", path], f"{target}", DerivationError).strip()
    if not drv.endswith(".drv") or not os.path.isfile(drv):
        raise DerivationError(f"{target} is not a derivation, nor the output of one known here (give a .drv "
                              f"store path or an installable)")
    return drv
