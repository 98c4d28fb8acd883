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

A dlopen that succeeds ends with `opening file=PATH [NS]; direct_opencount=N`.
One that fails (a need found nowhere) prints `file=PATH [NS];  destroying
link map` for each object it had mapped, before that line: glibc unmaps
them, so they are failed loads (`Image.failed`), not loaded objects. The
same line after a dlopen that succeeded is a dlclose: the object was loaded.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

NEEDED, DLOPEN, PROGRAM, INTERPRETER = "needed", "dlopen", "program", "interpreter"

_LINE = re.compile(r"^\s*(\d+):\s?(.*)$")
_FILE = re.compile(r"^file=(.+?) \[(\d+)\];\s+(needed by|dynamically loaded by|generating link map)(?: (.+?) \[\d+\])?$")
_TRYING = re.compile(r"^\s*trying file=(.+)$")
_DESTROY = re.compile(r"^file=(.+?) \[\d+\];\s+destroying link map$")
_OPENED = re.compile(r"^opening file=(.+?) \[\d+\]; direct_opencount=\d+$")

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
        self.failed: list[Loaded] = []  # mapped by a dlopen that failed, and unmapped by it
        self.started = False  # control was transferred to the program
        self._pending: dict[str, tuple[str, str]] = {}
        self._tried: str | None = None
        self._interpreter: str | None = None
        self._opening: list[int] = []  # dlopens not yet done: the index of each one's first object
        self._gone: set[int] = set()  # indices of objects a failed dlopen unmapped
        self._done: set[int] = set()  # indices of objects of dlopens that succeeded

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
            if what != "needed by":
                _prune(image)
                image._opening.append(len(image.objects))
            continue
        if image is None:
            if line.startswith(("initialize program:", "calling init:")):
                image = current[pid] = Image(pid)  # a program that needs nothing beyond ld.so
                images.append(image)
            else:
                continue
        d = _DESTROY.match(line)
        if d is not None:
            _destroyed(image, d[1])
            continue
        o = _OPENED.match(line)
        if o is not None:
            _opened(image, o[1])
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
    for image in images:
        if image._gone:
            image.failed = [o for i, o in enumerate(image.objects) if i in image._gone]
            image.objects = [o for i, o in enumerate(image.objects) if i not in image._gone]
    return images


def _opened(image: Image, path: str) -> None:
    """A dlopen of `path` succeeded: it and the dlopens it made are done, and
    what they mapped stays loaded (a later unmapping is a dlclose)."""
    for k in range(len(image._opening) - 1, -1, -1):
        start = image._opening[k]
        if start < len(image.objects) and image.objects[start].path == path:
            image._done.update(range(start, len(image.objects)))
            del image._opening[k:]
            return


def _destroyed(image: Image, path: str) -> None:
    """glibc unmapped `path`: inside a dlopen not yet done, that dlopen
    failed and the object was never loaded; else a dlclose (kept)."""
    if not image._opening:
        return
    for i in range(len(image.objects) - 1, image._opening[0] - 1, -1):
        if i not in image._gone and i not in image._done and path in (
                image.objects[i].path, image.objects[i].name):
            image._gone.add(i)
            break
    _prune(image)


def _prune(image: Image) -> None:
    """Drop the dlopens that are over: all they mapped is gone, or they
    mapped nothing (failed before mapping anything)."""
    while image._opening and all(i in image._gone for i in range(image._opening[-1], len(image.objects))):
        image._opening.pop()


def _finish(image: Image) -> None:
    """Put the program and its interpreter first, once the image runs."""
    head = []
    if image.program:
        head.append(Loaded(image.program, image.program, PROGRAM, None))
    if image._interpreter:
        head.append(Loaded(os.path.basename(image._interpreter), image._interpreter, INTERPRETER, None))
    image.objects[:0] = head
    # A constructor's dlopen runs before control is transferred: its indices move with the head.
    image._opening = [i + len(head) for i in image._opening]
    image._gone = {i + len(head) for i in image._gone}
    image._done = {i + len(head) for i in image._done}


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
