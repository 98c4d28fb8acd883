"""closure-audit run with its standard output on a pseudo-terminal, as a
person at a terminal runs it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys


def pty_run(args: list[str], env: dict) -> bytes:
    """Run closure-audit with its standard output on a pseudo-terminal."""
    leader, follower = pty.openpty()
    e = dict(os.environ, **env)
    e.pop("NO_COLOR", None) if "NO_COLOR" not in env else None
    proc = subprocess.Popen([sys.executable, "-m", "closure_audit", *args], stdout=follower,
                            stderr=subprocess.DEVNULL, env=e)
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(leader)
    return out
