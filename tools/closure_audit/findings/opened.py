"""Judge what objects open at run time: one row per object and name for
the listing, and findings where a name would not load.

Takes: the load chains (loader/chains.py Resolved) and what their objects
may open, read by loader/dlopen.py read_opened (each object's requests by
path, the names that could not be read, the bytes searched); dlopen.resolve
answers each request as glibc's dlopen would, through the loader.
Gives: findings on the run's collector, and Rows for the listing. Reads no
file: a name is never read here.

- driver: in a Nix store the opener needs a driver directory in its own
  search path (missing-driver-runpath, as for a DT_NEEDED driver library);
- toolkit: must resolve inside the closure or tree (unresolved-dlopen-library);
  found only on the host of a tree, it is cuda-library-from-host: a second
  copy of a CUDA library beside the tree's, in one process;
- optional, unknown: info when they resolve nowhere; never an error;
- a name the object's dlopen metadata note declares: by the note's priority,
  whatever its class (required: error, recommended: warning, suggested: info);
- a name without a version that nothing answers while a versioned sibling
  is loaded (`libzzzrt.so` beside `libzzzrt.so.13`): info, a fallback that
  glibc does not take the sibling for.

Every finding names the opener, the string that names the library and its
byte offset in the opener.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..loader import dlopen
from ..loader.chains import Resolved
from ..loader.model import ALREADY_LOADED, DRIVER, NOT_FOUND, PRELOADED, Chain, Loader
from .collector import Findings
from .loading import FromHost

UNRESOLVED, OPTIONAL_ABSENT, UNKNOWN_ABSENT = (
    "unresolved-dlopen-library", "optional-dlopen-library", "unknown-dlopen-library")
DRIVER_RULE = "missing-driver-runpath"
FALLBACK = "dlopen-fallback-name"
# A name a dlopen note declares and nothing provides, by the note's priority.
NOTE_RULES = {"required": UNRESOLVED, "recommended": "recommended-dlopen-library", "suggested": OPTIONAL_ABSENT}


@dataclass(kw_only=True)
class Row:
    """One library one object may open, and where it was found."""

    file: str  # the opener, which holds the string
    name: str
    string: str
    offset: int
    klass: str
    family: str | None
    how: str  # as in the load tree: runpath, rpath, default, already-loaded, driver, not-found, ...
    path: str | None
    inside: bool  # found inside the closure or tree (or the driver, or already loaded)
    priority: str | None = None  # from a dlopen metadata note; None: a string in read-only data
    feature: str | None = None  # the note's feature
    fallback_for: str | None = None  # the loaded versioned sibling of an unanswered name without a version

    def to_json(self) -> dict:
        return {"file": self.file, "name": self.name, "string": self.string, "offset": self.offset,
                "class": self.klass, "family": self.family, "how": self.how, "path": self.path,
                "inside": self.inside, "priority": self.priority, "feature": self.feature,
                "fallback_for": self.fallback_for}


class OpenedJudge:
    """Resolves each object's requests (read once per object: `requests`, by
    real path) in every chain that loads the object, and adds findings to the
    run's collector."""

    def __init__(self, loader: Loader, findings: Findings, requests: dict[str, list[dlopen.Request]],
                 providers: dict[str, list[str]] | None = None, from_host: FromHost | None = None):
        self.loader = loader
        self.env = loader.env
        self.add = findings.add
        self.providers = providers or {}
        self.from_host = from_host if from_host is not None else FromHost()
        self._requests = requests
        self._rows: dict[tuple[str, str], Row] = {}
        self._searches: dict = {}  # pattern searches, shared by every chain

    @property
    def rows(self) -> list[Row]:
        return sorted(self._rows.values(), key=lambda r: (r.file, r.name))

    def judge(self, chain: Chain) -> None:
        names = None
        for obj in chain.objects:
            if obj.leaf:
                continue
            requests = self._requests[obj.real]  # read_opened reads every object of the chains
            if not requests:
                continue
            if names is None:
                names = dlopen.loaded_names(chain)
            self._driver(chain, obj, [r for r in requests if r.klass == "driver"])
            for request in requests:
                res = dlopen.resolve(self.loader, chain, obj, request, names, self._searches)
                inside = res.how in (DRIVER, ALREADY_LOADED, PRELOADED) or (
                    res.how != NOT_FOUND and self.env.inside(self.loader.realpath(res.path)))
                sibling = dlopen.loaded_sibling(names, request) if res.how == NOT_FOUND else None
                row = Row(file=obj.real, name=request.name, string=request.string, offset=request.offset,
                          klass=request.klass, family=request.family, how=res.how, path=res.path, inside=inside,
                          priority=request.priority, feature=request.feature,
                          fallback_for=sibling.real if sibling is not None else None)
                key = (obj.real, request.name)
                # An object judged in several chains: keep the worst outcome.
                if key not in self._rows or (self._rows[key].inside and not inside):
                    self._rows[key] = row
                if sibling is not None and request.priority is None:
                    self._fallback(chain, obj.real, request, res, sibling)
                elif (request.klass == "toolkit" and not inside and not self.env.nix and res.how != NOT_FOUND
                        and request.priority in (None, "required")):
                    self.from_host.note(request.name, obj.real, res.path, **self._evidence(request))
                elif request.klass == "toolkit" and not inside or res.how == NOT_FOUND:
                    self._absent(chain, obj.real, request, res)

    def _evidence(self, request: dlopen.Request) -> dict:
        out = {"string": request.string, "offset": request.offset, "section": request.section,
               "class": request.klass, "family": request.family}
        if request.priority is not None:
            out.update(priority=request.priority, feature=request.feature, description=request.description,
                       sonames=list(request.patterns))
        return out

    def _fallback(self, chain: Chain, file: str, request: dlopen.Request, res, sibling) -> None:
        self.add(FALLBACK, file,
                 f"opens {_named(request)}, a fallback name: glibc matches loaded objects by exact name or "
                 f"SONAME and searches for a file of exactly that name, so the loaded "
                 f"{sibling.elf.soname or sibling.requested} does not answer it and this dlopen fails "
                 f"unless a file {request.name} is installed",
                 needed=request.name, loaded=sibling.real, searched=res.searched,
                 chain=[o.real for o in _loaders(chain, file)], **self._evidence(request))

    def _driver(self, chain: Chain, obj, drivers: list[dlopen.Request]) -> None:
        env = self.env
        if not env.nix or not drivers:
            return
        dirs = self.loader.search_path(obj, chain.root)
        if any(d.path in env.driver_dirs for d in dirs):
            return
        first = min(drivers, key=lambda r: (not r.name.startswith("libcuda.so"), r.offset))
        others = len(drivers) - 1
        self.add(DRIVER_RULE, obj.real,
                 f"opens driver library {first.name} at run time (string at offset {first.offset:#x}"
                 f"{f', and {others} more' if others else ''}) but no driver directory "
                 f"({', '.join(env.driver_dirs)}) is in its runpath",
                 needed=first.name, opened=sorted(r.name for r in drivers), **self._evidence(first))

    def _absent(self, chain: Chain, file: str, request: dlopen.Request, res) -> None:
        where = "closure" if self.env.nix else "tree"
        found = f"; it would load from outside the {where}, at {res.path}" if res.path and res.how != NOT_FOUND else ""
        searched = f"searched {len(res.searched)} director{'y' if len(res.searched) == 1 else 'ies'}"
        if res.error:
            searched = res.error
        text = f"opens {_named(request)}, which is not in the {where}; {searched}{found}"
        fields = dict(needed=request.name, searched=res.searched, found=res.path if res.how != NOT_FOUND else None,
                      chain=[o.real for o in _loaders(chain, file)], **self._evidence(request))
        if request.priority is not None:
            if request.klass != "driver":  # the driver is judged by _driver, as for a string
                feature = f" for {request.feature}" if request.feature else ""
                self.add(NOTE_RULES[request.priority], file,
                         f"opens {_named(request)}{feature}, {request.priority}, which is not in the {where}; "
                         f"{searched}{found}", **fields)
            return
        providers = [] if res.error else self.providers.get(request.name, [])
        if request.klass == "toolkit" and providers and not chain.root.elf.is_executable and res.how == NOT_FOUND:
            # As for a DT_NEEDED entry: the audit holds the file, this object's
            # search path does not reach it, so it loads only where the process has it already.
            self.add("needs-preloaded-library", file,
                     f"opens {_named(request)}, which is not in its search path; it loads only if the "
                     f"process already has {providers[0]}",
                     providers=providers, **fields)
        elif request.klass == "toolkit":
            self.add(UNRESOLVED, file, text, **fields)
        elif request.klass == "optional":
            self.add(OPTIONAL_ABSENT, file, f"may open {_named(request)}, found nowhere: optional, what needs it "
                     f"is off", **fields)
        elif request.klass == "unknown":
            self.add(UNKNOWN_ABSENT, file, text, **fields)


def _named(request: dlopen.Request) -> str:
    """How a finding names what is opened: the name, and the string with its offset."""
    if request.priority is not None:
        return f"{request.name} (its dlopen note, at offset {request.offset:#x})"
    string = "" if request.string == request.name else f" {request.string!r}"
    return f"{request.name} (string{string} at offset {request.offset:#x})"


def judge_opened(loader: Loader, resolved: Resolved, findings: Findings, opened: dlopen.Opened,
                 from_host: FromHost | None = None) -> OpenedJudge:
    """Judge every chain; the judge keeps the rows for the listing.
    `opened`: what dlopen.read_opened read of the chains' objects (a name
    that could not be read is an invalid-elf finding); `from_host` gathers
    the CUDA libraries only the host provides, with the loading judge's."""
    judge = OpenedJudge(loader, findings, opened.requests, resolved.providers, from_host)
    for chain in resolved.chains:
        judge.judge(chain)
    findings.invalid_elf(opened.problems)
    return judge


def _loaders(chain: Chain, file: str) -> list:
    """The load chain from the chain's first object down to `file`."""
    obj = next((o for o in chain.objects if o.real == file), None)
    out = []
    while obj is not None:
        out.append(obj)
        obj = obj.parent
    return out[::-1]
