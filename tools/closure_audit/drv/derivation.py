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
import re
from dataclasses import dataclass

from ..errors import DerivationError
from ..nix.storepath import name_part

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
        # Bytes, decoded at once: a text stream per file costs more than the parse.
        with open(path, "rb", buffering=0) as f:
            text = f.read().decode("utf-8", "surrogateescape")
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
