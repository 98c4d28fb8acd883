"""A derivation to build against its like in a reference graph (what the
cache builds): their differences, nix-diff style, and the CUDA setting
behind each through lib/data/cuda-settings.json (docs/nix/options.md).

A difference is (kind, name, old, new): `old` is the reference's value,
`new` the target's; None where one side has no such thing. Environment
values that are lists (`;`- or space-separated) also say which items were
added and dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..cuda.data import table
from ..nix.storepath import name_part, parse_name
from .derivation import Derivation


@dataclass(frozen=True, kw_only=True)
class Difference:
    kind: str  # env | input | source | builder | args | system | outputs
    name: str
    old: object
    new: object
    added: tuple[str, ...] | None = None  # list-valued env values only
    dropped: tuple[str, ...] | None = None
    setting: str | None = None


@dataclass(frozen=True)
class Setting:
    setting: str
    old: str | None
    new: str | None


@dataclass(frozen=True, kw_only=True)
class RootCause:
    drv: str
    name: str
    like: str | None  # the reference's derivation of that name
    like_cached: bool | None  # whether its outputs are valid or in a cache (None without a like)
    differences: list[Difference]
    settings: list[Setting]


def likes(roots: list[Derivation], reference: dict[str, Derivation] | None) -> dict[str, Derivation | None]:
    """Each root cause's like in `reference` (None: no --like), by the root cause's path."""
    return {d.path: None if reference is None else find_like(d, reference) for d in roots}


def explain(roots: list[Derivation], like: dict[str, Derivation | None], cached: dict[str, bool]) -> list[RootCause]:
    """Each root cause with its like and their differences; `cached` says,
    by path, whether a like's outputs can be had without building."""
    out = []
    for drv in roots:
        other = like[drv.path]
        diffs = [] if other is None else differences(other, drv)
        out.append(RootCause(drv=drv.path, name=drv.name, like=other and other.path,
                             like_cached=None if other is None else cached[other.path], differences=diffs,
                             settings=settings(diffs)))
    return out


def _items(value: str) -> list[str]:
    words = value.split()
    return words if len(words) > 1 else value.split(";") if value else []


def _is_list(old: str | None, new: str | None) -> bool:
    return any(v is not None and (";" in v or len(v.split()) > 1) for v in (old, new))


def _by_name(paths) -> dict[str, str]:
    return {name_part(p).removesuffix(".drv"): p for p in paths}


def differences(old: Derivation, new: Derivation) -> list[Difference]:
    diffs: list[Difference] = []
    # Variables named after outputs hold the output paths: they differ whenever anything does.
    skip = set(old.outputs) | set(new.outputs)
    for key in sorted((set(old.env) | set(new.env)) - skip):
        a, b = old.env.get(key), new.env.get(key)
        if a == b:
            continue
        if _is_list(a, b):
            was, now = _items(a or ""), _items(b or "")
            diffs.append(_judged(Difference(kind="env", name=key, old=a, new=b,
                                            added=tuple(i for i in now if i not in was),
                                            dropped=tuple(i for i in was if i not in now))))
        else:
            diffs.append(_judged(Difference(kind="env", name=key, old=a, new=b)))
    for kind, a, b in (("input", old.input_drvs, new.input_drvs), ("source", old.input_srcs, new.input_srcs)):
        was, now = _by_name(a), _by_name(b)
        for name in sorted(set(was) | set(now)):
            if was.get(name) != now.get(name):
                diffs.append(_judged(Difference(kind=kind, name=name, old=was.get(name), new=now.get(name))))
    for kind, a, b in (("builder", old.builder, new.builder), ("system", old.system, new.system),
                       ("args", list(old.args), list(new.args)),
                       ("outputs", sorted(old.outputs), sorted(new.outputs))):
        if a != b:
            diffs.append(Difference(kind=kind, name=kind, old=a, new=b))
    return diffs


def _judged(d: Difference) -> Difference:
    setting = _setting(d)
    return d if setting is None else replace(d, setting=setting)


def _setting(d: Difference) -> str | None:
    """The option of the settings table a difference comes from, or None."""
    t = table("cuda-settings.json")
    if d.kind == "env":
        if d.name not in t["flags"] and d.name not in t["env"]:
            return None
        old, new = _values(d, t)
        if old == new:  # flags changed, but not the CUDA one
            return None
        was, now = _items(old or ""), _items(new or "")
        changed = tuple(i for i in was if i not in now) + tuple(i for i in now if i not in was)
        return t["ptx"]["setting"] if _only_ptx(changed, t["ptx"]["markers"]) else "cudaCapabilities"
    if d.kind in ("input", "source"):
        if re.match(t["package_set"]["prefix"], d.name):
            return t["package_set"]["setting"]
        if parse_name(d.name)[0] in t["bottom"]["names"]:
            return t["bottom"]["setting"]
    return None


def _only_ptx(changed: tuple[str, ...], markers: list[str]) -> bool:
    """Every item that changed is a PTX one (`9.0+PTX`, `90-virtual`), or
    the same capability as one (`9.0` where `9.0+PTX` was)."""
    def bare(item: str) -> str:
        for m in markers:
            item = item.replace(m, "")
        return item
    ptx = {bare(i) for i in changed if any(m in i for m in markers)}
    return bool(ptx) and all(any(m in i for m in markers) or i in ptx for i in changed)


def settings(diffs: list[Difference]) -> list[Setting]:
    """Each setting behind the differences once, with its two values: the
    variable's values (for flags, the flag's value) for capabilities and PTX;
    for inputs, what was dropped and what was added, together: the package
    sets' versions (`12.9` → `13.0`), the bottom derivations' names for a
    nixpkgs revision."""
    t = table("cuda-settings.json")
    prefix = re.compile(t["package_set"]["prefix"])
    out: dict[tuple, Setting] = {}
    sides: dict[str, tuple[list, list]] = {}  # setting -> (REF's side, the target's side)
    for d in diffs:
        if d.setting is None:
            continue
        if d.kind in ("input", "source"):
            was, now = sides.setdefault(d.setting, ([], []))
            for side, value in ((was, d.old), (now, d.new)):
                if value is not None:
                    name = name_part(value).removesuffix(".drv")
                    m = prefix.match(name) if d.setting == t["package_set"]["setting"] else None
                    side.append(m[1] if m else name)
            continue
        old, new = _values(d, t)
        out.setdefault((d.setting, old, new), Setting(d.setting, old, new))
    for setting, (was, now) in sides.items():
        old, new = (", ".join(sorted(set(v))) or None for v in (was, now))
        out[(setting, old, new)] = Setting(setting, old, new)
    return list(out.values())


def _values(d: Difference, t: dict) -> tuple[str | None, str | None]:
    """A variable's two values; for a list of flags, the CUDA flag's value among them."""
    flags = t["flags"].get(d.name)
    return (_flag_value(d.old, flags), _flag_value(d.new, flags)) if flags else (d.old, d.new)


def _flag_value(value: str | None, flags: list[str]) -> str | None:
    for item in _items(value or ""):
        if any(flag in item for flag in flags):
            return item.partition("=")[2] or item
    return None


def find_like(drv: Derivation, reference: dict[str, Derivation]) -> Derivation | None:
    """The derivation of the same name in the reference graph; failing that,
    one whose name differs only in its CUDA package-set prefix."""
    prefix = re.compile(table("cuda-settings.json")["package_set"]["prefix"])
    for other in reference.values():
        if other.name == drv.name:
            return other
    bare = prefix.sub("", drv.name)
    return next((o for o in reference.values() if prefix.sub("", o.name) == bare), None)
