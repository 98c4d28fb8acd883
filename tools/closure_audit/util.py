"""Small helpers every layer may use: byte sizes in and out ("6 GiB",
"500MB", 1048576; 5.3 GiB for people), file paths relative to the trees a
command was given (and which of them are wheels), the TOML files users
write, how a command line ends when its reader goes away, and how many
cores a process may use. Both tools (closure-audit, redist-features) import
it."""

from __future__ import annotations

import os
import re
import signal
import sys

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def usable_cores() -> int:
    """The cores this process may run on (its affinity, as a container or
    `taskset` sets it), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_size(value) -> int:
    """Bytes from an integer or a string with an optional unit; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("a size must be a number of bytes or a string such as '6 GiB'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if not isinstance(value, str):
        raise ValueError("a size must be a number of bytes or a string such as '6 GiB'")
    m = _SIZE.match(value)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {value!r} (try '6 GiB', '500 MB' or a number of bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_apart(a: int, b: int) -> tuple[str, str]:
    """Two sizes as format_size writes them, or as exact byte counts where
    rounding would make different sizes read the same ("3.0 MiB, over 3.0 MiB")."""
    fa, fb = format_size(a), format_size(b)
    return (f"{a:,} bytes", f"{b:,} bytes") if fa == fb and a != b else (fa, fb)


def format_growth(old: int, new: int) -> str:
    """A change of size, signed, with its percentage of the old size when there is one: +1.2 MiB (+3.4%)."""
    delta = format_size(new - old, signed=True)
    return f"{delta} ({(new - old) * 100 / old:+.1f}%)" if old else delta


def format_size(n: int, signed: bool = False) -> str:
    sign = ("+" if n > 0 else "-" if n < 0 else "±") if signed else ("-" if n < 0 else "")
    n = abs(n)
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor:
            return f"{sign}{n / factor:.1f} {unit}"
    return f"{sign}{n} B"


# File paths relative to the trees a command was given.
def under(path: str, top: str) -> bool:
    """`path` is `top` or lies inside it."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def relative_to(path: str, roots: tuple[str, ...] | list[str]) -> str | None:
    """`path` relative to the first of `roots` that holds it, else None."""
    for root in roots:
        top = root.rstrip("/") + "/"
        if path.startswith(top):
            return path[len(top):]
    return None


def is_wheel(path: str) -> bool:
    """A Python wheel: audited as the tree it unpacks to."""
    return path.endswith(".whl") and os.path.isfile(path)


def read_toml(path: str, what: str, error: type[Exception]) -> dict:
    """Reading the TOML files users write (policies, budgets): every failure is
    one line naming the file, raised as the caller's error class."""
    import tomllib  # only when a file is given: start-up stays lean

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise error(f"{what} file not found: {path}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not valid TOML: not UTF-8 text") from None
    except RecursionError:
        raise error(f"{what} {path} is not valid TOML: nested too deeply") from None


def reader_gone() -> int:
    """End as Unix tools do when the reader of standard output goes away: by
    SIGPIPE, with nothing left to flush at exit (no "Exception ignored")."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    return 128 + signal.SIGPIPE  # not reached where the signal ends the process
