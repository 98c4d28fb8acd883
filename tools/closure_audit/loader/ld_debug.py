"""What the real loader did: glibc's `LD_DEBUG=files,libs` output, read
back into the objects each process image loaded, in load order.

glibc writes one file per process (LD_DEBUG_OUTPUT.PID); a forked child
writes into its parent's file under its own pid, and an exec'd program
starts a new image in the same file. For each object it prints

    file=NAME [NS];  needed by REQUESTER [NS]          (a DT_NEEDED entry)
    file=NAME [NS];  dynamically loaded by CALLER [NS]  (dlopen)
      trying file=PATH                                 (libs: each candidate)
    file=NAME [NS];  generating link map               (found: PATH is the last tried)

and a name already loaded prints nothing. The program itself and the
interpreter are known from `initialize program:` and the first
`calling init:` (ld.so's own init, which runs first).
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

NEEDED, DLOPEN, PROGRAM, INTERPRETER = "needed", "dlopen", "program", "interpreter"

_LINE = re.compile(r"^\s*(\d+):\s?(.*)$")
_FILE = re.compile(r"^file=(.+?) \[(\d+)\];\s+(needed by|dynamically loaded by|generating link map)(?: (.+?) \[\d+\])?$")
_TRYING = re.compile(r"^\s*trying file=(.+)$")

# One object of a process image: `name` as requested, `path` as opened
# (its links not resolved), `how` (NEEDED, DLOPEN, PROGRAM or INTERPRETER),
# `by`: the requesting object's name as the loader knows it (a path, or the
# program's name), or None.
Loaded = namedtuple("Loaded", "name path how by")


class Image:
    """One program image: its pid, the program's name, its objects in load order."""

    def __init__(self, pid: int):
        self.pid = pid
        self.program: str | None = None
        self.objects: list[Loaded] = []
        self.started = False  # control was transferred to the program
        self._pending: dict[str, tuple[str, str]] = {}
        self._tried: str | None = None
        self._interpreter: str | None = None

    def names(self) -> set[str]:
        out = {o.path for o in self.objects} | {o.name for o in self.objects}
        return out | ({self.program} if self.program else set())


def parse(text: str) -> list[Image]:
    """The images of one LD_DEBUG output file, in the order they started."""
    images: list[Image] = []
    current: dict[int, Image] = {}
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        pid, line = int(m[1]), m[2]
        image = current.get(pid)
        f = _FILE.match(line)
        if f is not None:
            name, _ns, what, by = f.groups()
            if what == "generating link map":
                if image is None:
                    continue
                how, requester = image._pending.pop(name, (NEEDED, None))
                path = name if "/" in name else (image._tried or name)
                image.objects.append(Loaded(name, path, how, requester))
                image._tried = None
                continue
            # A need of a program not yet seen in this image, or of the
            # program once it runs, is the first need of a new (exec'd) image.
            if image is None or (what == "needed by" and image.started
                                 and (by == image.program or by not in image.names())):
                image = current[pid] = Image(pid)
                images.append(image)
            image._pending[name] = (NEEDED if what == "needed by" else DLOPEN, by)
            continue
        if image is None:
            if line.startswith(("initialize program:", "calling init:")):
                image = current[pid] = Image(pid)  # a program that needs nothing beyond ld.so
                images.append(image)
            else:
                continue
        t = _TRYING.match(line)
        if t is not None:
            image._tried = t[1]
        elif line.startswith("calling init: ") and image._interpreter is None and not image.started:
            image._interpreter = line[len("calling init: "):].strip()
        elif line.startswith("initialize program: "):
            if image.started:  # an exec'd program that loads nothing but ld.so
                image = current[pid] = Image(pid)
                images.append(image)
            image.program = line[len("initialize program: "):].strip()
        elif line.startswith("transferring control: "):
            image.started = True
            _finish(image)
    return images


def _finish(image: Image) -> None:
    """Put the program and its interpreter first, once the image runs."""
    head = []
    if image.program:
        head.append(Loaded(image.program, image.program, PROGRAM, None))
    if image._interpreter:
        head.append(Loaded(os.path.basename(image._interpreter), image._interpreter, INTERPRETER, None))
    image.objects[:0] = head


def read_dir(directory: str, prefix: str) -> list[Image]:
    """Every image of every LD_DEBUG_OUTPUT file `prefix`.PID in `directory`,
    ordered by pid and then as they started."""
    out: list[Image] = []
    files = sorted((n for n in os.listdir(directory) if n.startswith(prefix + ".")),
                   key=lambda n: (not n[len(prefix) + 1:].isdigit(), int(n[len(prefix) + 1:] or 0)
                                  if n[len(prefix) + 1:].isdigit() else 0, n))
    for name in files:
        with open(os.path.join(directory, name), encoding="utf-8", errors="surrogateescape") as f:
            out.extend(parse(f.read()))
    return out
