"""Judge the GPU code inside ELF files against the capabilities a build was
meant for.

Read (elf/fatbin.py), group by section, kind and architecture, judge per file:

- a cubin is of use when it runs on a requested GPU (even beside a closer
  one: cubins of one file need not hold the same kernels); PTX when the driver
  would compile it for a requested GPU that has no cubin in the file, or, with
  forward compatibility, when it is the newest plain PTX the highest requested
  GPU can run (what GPUs newer than any requested run); LTO IR when nvJitLink
  can link it for a requested GPU;
- missing-gpu-arch: a requested GPU nothing in the file runs on, or, with
  forward compatibility, no plain PTX for the highest requested GPU or below;
- unexpected-gpu-arch: code of no use to any requested GPU, with its bytes;
- jit-only-gpu-arch: a requested GPU that only PTX serves (slow first start);
- native-arch-fallback: sm_75 + compute_75 alone, 7.5 not requested: what nvcc
  makes of -arch=native where it finds no GPU (byte for byte -arch=sm_75, so a
  Turing build says so by requesting 7.5).

Takes: elf/fatbin.py's Entries of each file (FileArchs, made by ops/archs.py
and ops/why_build.py), and a cuda/request.py Request. Gives: FileArchs and
ArchReport for output/, the verdict of one file on one GPU (on_gpu), and
GpuJudge's findings (missing-, unexpected-, jit-only-gpu-arch,
native-arch-fallback, invalid-fatbin). The kernels of entries compared are
still read here, when asked (Kernels; test_judges_read_nothing.py, LEFT).
"""

from __future__ import annotations

from ..elf.fatbin import Entry
from ..elf.payloads import kernels_of
from ..cuda.code import Code, runs_on, serves
from ..cuda.request import Request
from ..util import format_size
from .collector import Findings
from .rules import Finding, has_error

NATIVE_FALLBACK = {"sm_75", "compute_75"}


class CodeGroup:
    """The entries of one code object kind and architecture in one section."""

    __slots__ = ("section", "code", "entries", "stored", "uncompressed", "compression", "debug", "wanted", "objects")

    def __init__(self, section: str, code: Code):
        self.section = section
        self.code = code
        self.entries = 0
        self.stored = 0
        self.uncompressed = 0
        self.compression: set[str] = set()
        self.debug = False
        self.wanted: bool | None = None  # None: nothing was requested
        self.objects: list[Entry] = []

    def add(self, e: Entry) -> None:
        self.objects.append(e)
        self.entries += 1
        self.stored += e.stored
        self.uncompressed += e.uncompressed
        self.compression.add(e.compression)
        self.debug = self.debug or e.debug


class Kernels:
    """The kernels of one file's code objects, read when first asked for:
    each asks for payloads to be read and decompressed, which a listing never
    needs. Code that defines no kernel is never launched, so it neither fails
    nor serves a GPU; code whose kernels cannot be read (LTO IR, a damaged
    payload) counts as holding some."""

    __slots__ = ("path", "groups", "_names")

    def __init__(self, path: str, groups: list[CodeGroup]):
        self.path = path
        self.groups = groups
        self._names: dict[int, frozenset[str] | None] = {}  # by id of the group

    def codes(self) -> list[Code]:
        return sorted({g.code for g in self.groups}, key=code_order)

    def of_group(self, g: CodeGroup) -> frozenset[str] | None:
        """The kernels of one group, None when some object's cannot be read."""
        key = id(g)
        if key not in self._names:
            self._names[key] = kernels_of(self.path, g.objects)
        return self._names[key]

    def counted(self, g: CodeGroup) -> int | None:
        """The kernels of a group when they were read and could be, else None."""
        names = self._names.get(id(g))
        return None if names is None else len(names)

    def of(self, code: Code) -> frozenset[str] | None:
        """The kernels of a code across sections."""
        out: frozenset[str] | None = frozenset()
        for g in self.groups:
            if g.code == code:
                names = self.of_group(g)
                if names is None:
                    return None
                out |= names
        return out

    def read_for(self, devices: list[tuple[int, int]], usable=serves) -> None:
        """Read now the kernels verdict() may ask for on `devices` (those of
        every code, where no cubin serves a device), so that judging reads
        nothing."""
        codes = self.codes()
        if any(not any(usable(c, d) for c in codes if c.kind == "sm") for d in devices):
            for c in codes:
                self.of(c)

    def hold_any(self, codes) -> bool:
        """Whether any of `codes` defines a kernel (or may)."""
        return any((names := self.of(c)) is None or names for c in codes)

    def uncovered(self, code: Code, device: tuple[int, int]) -> frozenset[str] | None:
        """The kernels of `code` that no cubin running on `device` defines
        (None: unknown, some kernels could not be read)."""
        names = self.of(code)
        # In a fixed order: which cubins are read (and counted in the report) must not vary between runs.
        for c in sorted({g.code for g in self.groups if g.code.kind == "sm" and runs_on(g.code, device)},
                        key=code_order):
            if not names:
                break
            have = self.of(c)
            if have is None:
                return None
            names -= have
        return names


def verdict(kernels: Kernels, codes: list[Code], device: tuple[int, int], usable=serves) -> tuple[str, list[Code]]:
    """How a file's code runs on `device`, by the rule `usable`: "cubin"; "jit"
    with the PTX or LTO IR that serves it instead; "missing" when nothing that
    defines kernels does; "idle" when the file defines no kernel at all, which
    fails no GPU. Kernels are read only where a cubin is not enough."""
    if any(usable(c, device) for c in codes if c.kind == "sm"):
        return "cubin", []
    jit = [c for c in codes if c.kind != "sm" and usable(c, device) and kernels.hold_any([c])]
    if jit:
        return "jit", jit
    return ("missing" if kernels.hold_any(codes) else "idle"), []


def on_gpu(f: "FileArchs", device: tuple[int, int], isa: tuple[int, int] | None = None) -> tuple[str, list[Code]]:
    """The one judgement of a file on a GPU, which `archs` and `why-build
    --gpu` both give: verdict() by NVIDIA's rules (cuda/code.py), where a
    driver compiling PTX up to ISA version `isa` (None: any) cannot use PTX
    of a newer one. A code with one entry too new counts as too new: its
    kernels may be in that entry."""
    if isa is None:
        return verdict(f.kernels, f.codes(), device)
    too_new = {g.code for g in f.groups if g.code.kind == "compute" and any(e.version > isa for e in g.objects)}
    return verdict(f.kernels, f.codes(), device, lambda c, d: c not in too_new and serves(c, d))


def jit_bytes(f: "FileArchs", codes: list[Code]) -> int:
    """What the driver compiles at first load: the uncompressed PTX (or LTO
    IR) of `codes` in the file, headers left out."""
    return sum(e.uncompressed - e.header for g in f.groups if g.code in codes for e in g.objects)


class FileArchs:
    __slots__ = ("path", "containers", "groups", "problems", "kernels")

    def __init__(self, path: str, containers: int, groups: list[CodeGroup], problems: list[str]):
        self.path = path
        self.containers = containers
        self.groups = groups
        self.problems = problems
        self.kernels = Kernels(path, groups)

    @property
    def entries(self) -> int:
        return sum(g.entries for g in self.groups)

    @property
    def stored(self) -> int:
        return sum(g.stored for g in self.groups)

    @property
    def uncompressed(self) -> int:
        return sum(g.uncompressed for g in self.groups)

    @property
    def prunable(self) -> int:
        return sum(g.stored for g in self.groups if g.wanted is False)

    def codes(self) -> list[Code]:
        return self.kernels.codes()


class ArchReport:
    __slots__ = ("targets", "mode", "deep", "request", "files", "elf_files", "findings")

    def __init__(self, *, targets: list[str], mode: str, deep: bool, request: Request | None, elf_files: int = 0):
        self.targets = targets
        self.mode = mode
        self.deep = deep
        self.request = request
        self.files: list[FileArchs] = []  # those with GPU code or problems
        self.elf_files = elf_files
        self.findings: list[Finding] = []

    @property
    def failed(self) -> bool:
        return has_error(self.findings)

    def totals(self) -> list[dict]:
        """Per code across every file: files, entries, stored, uncompressed."""
        out: dict[Code, dict] = {}
        for f in self.files:
            for g in f.groups:
                t = out.setdefault(g.code, {"code": g.code, "files": set(), "entries": 0, "stored": 0,
                                            "uncompressed": 0})
                t["files"].add(f.path)
                t["entries"] += g.entries
                t["stored"] += g.stored
                t["uncompressed"] += g.uncompressed
        return [{**t, "files": len(t["files"])} for _, t in sorted(out.items(), key=lambda kv: code_order(kv[0]))]


def code_order(code: Code) -> tuple:
    """cubins, then PTX, then LTO IR; by architecture; plain before a before f."""
    return ("sm", "compute", "lto").index(code.kind), code.major, code.minor, code.variant


def group(entries: list[Entry]) -> list[CodeGroup]:
    """One group per (section, code): nvcc -shared's second, tiny device-link
    cubin of an architecture joins the first instead of counting twice."""
    groups: dict[tuple, CodeGroup] = {}
    for e in entries:
        key = (e.section, e.kind, e.arch, e.variant)
        g = groups.get(key)
        if g is None:
            g = groups[key] = CodeGroup(e.section, e.code)
        g.add(e)
    return sorted(groups.values(), key=lambda g: (g.section, code_order(g.code)))


class GpuJudge:
    """Findings for one file at a time."""

    def __init__(self, request: Request | None, findings: Findings):
        self.request = request
        self.add = findings.add

    def file(self, f: FileArchs) -> None:
        for problem in f.problems:
            self.add("invalid-fatbin", f.path, problem, reason=problem)
        if not f.groups:
            return
        codes = f.codes()
        names = {c.name for c in codes}
        request = self.request
        devices = request.devices if request else []
        if names == NATIVE_FALLBACK and (7, 5) not in devices:
            self.add("native-arch-fallback", f.path,
                     "holds only sm_75 and compute_75, what nvcc builds for -arch=native on a machine "
                     "without a GPU; name the capabilities (cudaCapabilities, -gencode), or request 7.5 if "
                     "it is meant", codes=sorted(names))
        if request is None:
            return
        self._missing(f, codes, devices)
        self._unexpected(f, codes, devices)

    def _missing(self, f: FileArchs, codes: list[Code], devices: list[tuple[int, int]]) -> None:
        have = [c.name for c in codes]
        for d in devices:
            cap = f"{d[0]}.{d[1]}"
            how, jit = on_gpu(f, d)
            ptx = [c for c in jit if c.kind == "compute"]
            if how in ("cubin", "idle"):
                continue
            if ptx:
                self.add("jit-only-gpu-arch", f.path,
                         f"capability {cap} runs only by JIT-compiling {ptx[-1].name} at first start: "
                         f"no cubin runs on it", capability=cap, ptx=ptx[-1].name)
            else:
                self.add("missing-gpu-arch", f.path,
                         f"nothing runs on capability {cap}: no cubin for it and no PTX to compile for it "
                         f"(has {', '.join(have)})", capability=cap, needs="cubin or ptx", codes=have)
        if (self.request.forward_compat and forward_ptx(codes, devices[-1]) is None
                and f.kernels.hold_any(codes)):
            cap = f"{devices[-1][0]}.{devices[-1][1]}"
            self.add("missing-gpu-arch", f.path,
                     f"no plain PTX for capability {cap} or below, so GPUs newer than those requested cannot "
                     f"run it (forward compatibility was requested)", capability=cap, needs="ptx", codes=have)

    def _unexpected(self, f: FileArchs, codes: list[Code], devices: list[tuple[int, int]]) -> None:
        cubins = [c for c in codes if c.kind == "sm"]
        fwd = forward_ptx(codes, devices[-1]) if self.request.forward_compat else None
        wanted = {}
        for c in codes:
            useful = [d for d in devices if serves(c, d)]
            if c.kind == "compute":  # needed where a kernel of it has no cubin for a GPU it serves
                useful = [d for d in useful if not any(serves(b, d) for b in cubins)
                          or f.kernels.uncovered(c, d) != frozenset()]
            wanted[c] = bool(useful) or c == fwd
        for g in f.groups:
            g.wanted = wanted[g.code]
        for c in codes:
            if wanted[c]:
                continue
            gs = [g for g in f.groups if g.code == c]
            stored, entries = sum(g.stored for g in gs), sum(g.entries for g in gs)
            if c.kind == "compute" and any(serves(c, d) for d in devices):
                why = "every kernel in it has a cubin for each GPU it compiles for" + (
                    f", and {fwd.name} is the PTX kept for newer GPUs" if fwd else
                    " and forward compatibility was not requested")
            else:
                why = "no requested GPU can use it"
            self.add("unexpected-gpu-arch", f.path,
                     f"{c.name}: {format_size(stored)} in {entries:,} entr{'y' if entries == 1 else 'ies'}; {why}",
                     code=c.name, stored=stored, entries=entries, sections=sorted({g.section for g in gs}))


def forward_ptx(codes: list[Code], top: tuple[int, int]) -> Code | None:
    """The PTX that keeps a file running on GPUs newer than `top`: the newest
    plain (not a/f) PTX at or below it."""
    fit = [c for c in codes if c.kind == "compute" and not c.variant and (c.major, c.minor) <= top]
    return max(fit, key=code_order, default=None)
