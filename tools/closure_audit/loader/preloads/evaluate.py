"""Run a small function of a framework's Python file on literal inputs,
without importing the file: its assignments, `if`s and `return`s, over
strings, numbers, tuples and lists, with the few calls such functions make
(`int`, `str`, a string's `split` and `isdigit`, and other functions of the
same file). onnxruntime's `_get_nvidia_dll_paths` picks its directories by
the CUDA major of the build (`nvidia/cu13/lib` from CUDA 13 on,
`nvidia/<component>/lib` before): reading its tuples without running its
branches would take both layouts at once.

Anything else (an import on the path taken, a loop, an unknown name or
call) raises Unknown: the caller then says the file's shape is not read,
rather than guessing.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, replace

from .common import function


class Unknown(Exception):
    """The function does something this evaluator does not run."""


_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_METHODS = {"split", "isdigit", "startswith", "endswith", "lower", "strip"}
_DEPTH = 8  # calls of the file's own functions, nested


@dataclass(frozen=True)
class _Module:
    tree: ast.Module
    names: dict  # the module-level names its functions read (onnxruntime's cuda_version)
    depth: int = 0


def call(module: ast.Module, name: str, args: dict, names: dict | None = None):
    """The value `name(**args)` of the module's function returns (None when
    it ends without a return); `names`: the module-level names it reads."""
    return _function(_Module(module, dict(names or {})), name, args)


def _function(mod: "_Module", name: str, args: dict):
    fn = function(mod.tree, name)
    if fn is None or mod.depth > _DEPTH:
        raise Unknown(f"no function {name}")
    scope = dict(mod.names)
    params = fn.args.args
    defaults = [None] * (len(params) - len(fn.args.defaults)) + list(fn.args.defaults)
    for param, default in zip(params, defaults):
        if param.arg in args:
            scope[param.arg] = args[param.arg]
        elif default is not None:
            scope[param.arg] = _value(default, scope, mod)
        else:
            raise Unknown(f"{name}: no value for {param.arg}")
    return _run(fn.body, scope, mod)[1]


def _run(body: list[ast.stmt], scope: dict, mod: "_Module"):
    """(returned, value) of running the statements."""
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            value = _value(stmt.value, scope, mod)
            for t in stmt.targets:
                scope[t.id] = value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            scope[stmt.target.id] = _value(stmt.value, scope, mod)
        elif isinstance(stmt, ast.If):
            done, value = _run(stmt.body if _value(stmt.test, scope, mod) else stmt.orelse, scope, mod)
            if done:
                return True, value
        elif isinstance(stmt, ast.Return):
            return True, _value(stmt.value, scope, mod) if stmt.value is not None else None
        else:
            raise Unknown(f"line {stmt.lineno}: {type(stmt).__name__}")
    return False, None


def _value(node: ast.expr, scope: dict, mod: "_Module"):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        raise Unknown(f"line {node.lineno}: {node.id}")
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(e, scope, mod) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.JoinedStr):
        out = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                out += str(part.value)
            elif isinstance(part, ast.FormattedValue) and part.format_spec is None and part.conversion == -1:
                out += str(_value(part.value, scope, mod))
            else:
                raise Unknown(f"line {node.lineno}: a formatted value")
        return out
    if isinstance(node, ast.BoolOp):
        value = None
        for v in node.values:
            value = _value(v, scope, mod)
            if (not value) if isinstance(node.op, ast.And) else value:
                return value
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, scope, mod)
    if isinstance(node, ast.Compare):
        left = _value(node.left, scope, mod)
        for op, right in zip(node.ops, node.comparators):
            right = _value(right, scope, mod)
            if type(op) not in _COMPARE:
                raise Unknown(f"line {node.lineno}: {type(op).__name__}")
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError as e:  # "13" >= 13
                raise Unknown(f"line {node.lineno}: {e}") from None
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _value(node.body if _value(node.test, scope, mod) else node.orelse, scope, mod)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, scope, mod), _value(node.right, scope, mod)
        if type(left) is not type(right) or not isinstance(left, (str, list, tuple)):
            raise Unknown(f"line {node.lineno}: +")
        return left + right
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        try:
            return _value(node.value, scope, mod)[node.slice.value]
        except (TypeError, IndexError, KeyError) as e:
            raise Unknown(f"line {node.lineno}: {e}") from None
    if isinstance(node, ast.Call):
        return _call(node, scope, mod)
    raise Unknown(f"line {node.lineno}: {type(node).__name__}")


def _call(node: ast.Call, scope: dict, mod: "_Module"):
    args = [_value(a, scope, mod) for a in node.args]
    kwargs = {k.arg: _value(k.value, scope, mod) for k in node.keywords if k.arg is not None}
    if len(kwargs) != len(node.keywords):
        raise Unknown(f"line {node.lineno}: **kwargs")
    fn = node.func
    try:
        if isinstance(fn, ast.Attribute) and fn.attr in _METHODS:
            target = _value(fn.value, scope, mod)
            if not isinstance(target, str):
                raise Unknown(f"line {node.lineno}: {fn.attr} of a non-string")
            return getattr(target, fn.attr)(*args, **kwargs)
        if isinstance(fn, ast.Name) and fn.id in ("int", "str") and fn.id not in scope and not kwargs:
            return {"int": int, "str": str}[fn.id](*args)
    except (TypeError, ValueError) as e:
        raise Unknown(f"line {node.lineno}: {e}") from None
    if isinstance(fn, ast.Name) and fn.id not in scope:
        params = function(mod.tree, fn.id)
        if params is None:
            raise Unknown(f"line {node.lineno}: {fn.id}()")
        bound = dict(zip((a.arg for a in params.args.args), args)) | kwargs
        return _function(replace(mod, depth=mod.depth + 1), fn.id, bound)
    raise Unknown(f"line {node.lineno}: a call")

