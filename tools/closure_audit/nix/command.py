"""One way to run Nix's commands: the flags every call needs, the check that
the tool is there, and failures as one line (Nix's own `error:` line)."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from ..errors import ClosureError, InputError

# Debian's Nix 2.8 and newer Nix alike take the new CLI only behind this flag.
FLAGS = ["--extra-experimental-features", "nix-command flakes"]


def find(tool: str = "nix", error: type[InputError] = ClosureError, why: str = "to read closures") -> str:
    """The path of a Nix tool, or `error` saying it is missing."""
    path = shutil.which(tool)
    if path is None:
        raise error(f"{tool} is not installed; it is needed {why}")
    return path


def run(cmd: list[str], what: str, error: type[InputError] = ClosureError) -> str:
    """Standard output of `cmd`; on failure, `error` with `what` and Nix's
    last `error:` line (or its last line)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise error(f"cannot run {cmd[0]}: {exc.strerror}") from None
    if p.returncode != 0:
        lines = [ln.strip() for ln in p.stderr.splitlines() if ln.strip()]
        msg = next((ln for ln in reversed(lines) if ln.startswith("error:")), lines[-1] if lines else "failed")
        raise error(f"{what}: {msg.removeprefix('error:').strip()}")
    return p.stdout


def nix(*args: str, what: str) -> str:
    """`nix ARGS` with the flags the new CLI needs, once the installed Nix is
    known to have that CLI."""
    tool = find("nix", why="to read closures (or give --path-info FILE)")
    have = version(tool)
    if have < MINIMUM:
        raise ClosureError(f"Nix {'.'.join(map(str, have)) or '(unknown version)'} is too old: closure-audit "
                           f"needs Nix {'.'.join(map(str, MINIMUM))} or newer (or give --path-info FILE)")
    return run([tool, *FLAGS, *args], what)


# `nix path-info --json` and `nix build` as used here came with Nix 2.4's CLI.
MINIMUM = (2, 4)


@functools.lru_cache(maxsize=None)
def version(tool: str) -> tuple[int, ...]:
    """The version of the Nix at `tool`, as numbers: (2, 8, 0)."""
    words = run([tool, "--version"], "nix --version").split()
    match = re.match(r"(\d+(?:\.\d+)*)", words[-1]) if words else None
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def config() -> dict[str, str]:
    """Nix's settings as the user has them: `nix config show` (Nix 2.20 and
    newer) or `nix show-config` (older), `name = value` lines."""
    tool = find("nix", why="to read Nix's settings (or give --store URL)")
    command = ["config", "show"] if version(tool) >= (2, 20) else ["show-config"]
    out = run([tool, *FLAGS, *command], f"nix {' '.join(command)}")
    settings = {}
    for line in out.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            settings[key.strip()] = value.strip()
    return settings
