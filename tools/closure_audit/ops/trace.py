"""`trace`: run a command under glibc's loader debugging and say what the
real loader did: every object each process image loaded, why, and from
where; judged by findings/trace.py (docs/commands/trace.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import namedtuple

from ..elf.walk import tree_root_for_file
from ..errors import TargetError
from ..findings.collector import Findings
from ..findings.trace import judge_trace
from ..host.probe import probe
from ..loader import ld_debug
from ..loader.libraries import CUDA_TOOLKIT_LIBRARIES, DRIVER_LIBRARIES
from ..loader.environment import matches_any
from ..nix.storepath import store_dir
from ..util import under
from . import result_type
from ..modes import TREE as TREE_MODE

TREE, STORE, HOST, DRIVER = "tree", "store", "host", "driver"

# command: the argument vector; against: the targets.Scope of the tree
# (--against) or None;
# quiet: send the command's standard output to standard error (--json);
# import_order: the frameworks the model's union imports first (--import-order).
Options = namedtuple("Options", "command against policy quiet import_order", defaults=(None,))
# One object of a process: `name` as requested, `path` as opened, `real`
# with its links resolved, `how` (ld_debug's NEEDED, DLOPEN, PROGRAM,
# INTERPRETER), `by` the requesting object's real path (None for the program
# and ld.so), `where`: TREE, STORE, HOST or DRIVER.
Traced = namedtuple("Traced", "name path real how by where")
# `failed`: what a dlopen that failed mapped and unmapped again (Traced records).
Process = namedtuple("Process", "pid program objects failed")
# `argv`, not `command`: every Result's `command` names its command (ops/__init__.py).
Result = result_type("trace", "argv exit_status tree processes findings", """argv: the argument
vector; exit_status: the command's (128 + N for signal N), `trace`'s own when no finding is an error;
tree: the tree the objects were judged against, or None; processes: Process records; findings: sorted.""")


def run(options: Options) -> Result:
    # The model first: a bad --import-order stops trace before the command runs.
    predicted = predictions(options.against, options.policy, options.import_order) if options.against else {}
    with tempfile.TemporaryDirectory(prefix="closure-audit-trace-") as d:
        env = dict(os.environ, LD_DEBUG="files,libs", LD_DEBUG_OUTPUT=os.path.join(d, "ld"))
        try:
            p = subprocess.run(options.command, env=env, stdout=sys.stderr if options.quiet else None)
        except FileNotFoundError:
            raise TargetError(f"command not found: {options.command[0]}") from None
        except PermissionError:
            raise TargetError(f"command cannot be run: {options.command[0]}") from None
        images = ld_debug.read_dir(d, "ld")
    status = p.returncode if p.returncode >= 0 else 128 - p.returncode  # killed by a signal: as a shell says
    tree = options.against.paths[0] if options.against else find_tree(images)
    processes = [_process(image, tree) for image in images]
    findings = Findings(options.policy, TREE_MODE, None)
    driver = probe("/").driver
    judge_trace(processes, tree_copies(tree, processes), driver.real if driver else None, predicted, findings)
    return Result(options.command, status, tree, processes, findings.sorted())


def find_tree(images) -> str | None:
    """The venv, conda env or site-packages the process's own objects come
    from: the program's (as exec'd: a venv's bin/python), else the first
    object's that has one."""
    for image in images:
        for obj in image.objects:
            if obj.how == ld_debug.PROGRAM and "/" not in obj.path:
                continue
            root = tree_root_for_file(os.path.abspath(obj.path))
            if root is None and obj.how != ld_debug.PROGRAM:
                root = tree_root_for_file(os.path.realpath(obj.path))
            if root is not None:
                return os.path.realpath(root)
    return None


def where(real: str, tree: str | None) -> str:
    """A driver library by its name wherever it lies outside the tree
    (NixOS keeps the driver in the store, behind /run/opengl-driver/lib)."""
    if tree and under(real, tree):
        return TREE
    if matches_any(os.path.basename(real), DRIVER_LIBRARIES):
        return DRIVER
    return STORE if under(real, store_dir()) else HOST


def _process(image, tree: str | None) -> Process:
    return Process(image.pid, image.program, _traced(image.objects, tree), _traced(image.failed, tree))


def _traced(loaded, tree: str | None) -> list[Traced]:
    objects = []
    for o in loaded:
        path = o.path
        if o.how == ld_debug.PROGRAM and "/" not in path:
            path = _which(path)
        real = os.path.realpath(path)
        by = None if o.by is None else os.path.realpath(_which(o.by) if "/" not in o.by else o.by)
        objects.append(Traced(o.name, path, real, o.how, by, where(real, tree)))
    return objects


def _which(name: str) -> str:
    """The program a process image names without a slash (argv[0])."""
    return shutil.which(name) or name


def tree_copies(tree: str | None, processes) -> dict[str, str]:
    """The tree's own file for each CUDA toolkit library some process
    loaded from the host, by file name (the tree walked only then)."""
    wanted = {os.path.basename(o.real) for p in processes for o in p.objects
              if o.where == HOST and matches_any(os.path.basename(o.real), CUDA_TOOLKIT_LIBRARIES)}
    wanted |= {o.name for p in processes for o in p.objects if o.where == HOST and o.name in wanted}
    if not tree or not wanted:
        return {}
    found: dict[str, str] = {}
    for top, _dirs, files in os.walk(tree):
        for name in wanted.intersection(files):
            found.setdefault(name, os.path.join(top, name))
    return found


def predictions(scope, policy, import_order=None) -> dict[tuple[str, str], str | None]:
    """What audit's model says each (requesting object, name) loads: the
    real path, or None where it finds nothing; where a framework's process
    (loader/process.py) loads the object, what the name gets there."""
    from ..pipeline.audit import audit  # the readers and the model: only with --against

    report, loader = audit(scope, policy, import_order=import_order)
    out: dict[tuple[str, str], str | None] = {}
    # A framework's process first (preloads, names already loaded), then each chain on its own; with
    # --import-order, the union in that order first: the command imports the frameworks together.
    procs = sorted(report.processes, key=lambda p: p.name != "union") if import_order else report.processes
    for chain in [p.link_map for p in procs] + report.chains:
        for obj in chain.objects:
            for res in obj.resolutions:
                path = res.target.real if res.target is not None else res.path
                out.setdefault((obj.real, res.needed), None if path is None else loader.realpath(path))
    for row in report.opened:
        if "/" not in row.name:
            out.setdefault((row.file, row.name), None if row.path is None else loader.realpath(row.path))
    return out
