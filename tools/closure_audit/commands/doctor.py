"""`closure-audit doctor [TARGET...]`: will CUDA programs of TARGET run on
this host, and if not, the exact fix (docs/doctor.md).

Resolves the installables among the targets, then ops/doctor.py reads the
host under --root (host/), reads and resolves the targets as `audit` does
(the driver library each object would load, the CUDA runtime, the GPU code)
and judges (findings/doctor.py)."""

from __future__ import annotations

import os

from .. import output
from ..errors import UsageError
from ..findings.rules import exit_status
from ..output.json_report import doctor_json
from ..output import progress
from . import options


def add_arguments(p) -> None:
    p.description = ("Check that CUDA programs of the targets will run on this host: the host's kind, the driver "
                     "library the targets would load, the driver's versions against the kernel module and the "
                     "CUDA runtime, and the GPUs against the GPU code compiled in. Without a target, the host "
                     "alone. Each problem comes with its fixes (docs/doctor.md).")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a store path, a result link, an installable (.#attr), or a venv or conda tree")
    p.add_argument("--root", metavar="DIR", default="/",
                   help="read the host under DIR: every file and command the checks use (default /)")
    options.add_policy(p)
    options.add_build(p)
    options.add_json(p)


def run(args) -> int:
    from ..ops import doctor

    if not os.path.isdir(args.root):
        raise UsageError(f"--root is not a directory: {args.root}")
    policy = options.load_policy(args)
    targets = resolve_installables(args.targets, args.build) if args.targets else []
    result = doctor.run(doctor.Options(args.root, targets, policy), progress.progress)
    output.show(args.json, lambda: doctor_json(*result), lambda t: t.render_doctor(t.console(), *result))
    return exit_status(result.findings)


def resolve_installables(targets: list[str], build: bool) -> list[str]:
    """Paths as they are; anything else (.#torch) is an installable, whose
    output paths the closure reader resolves."""
    paths = [t for t in targets if os.path.lexists(t)]
    installables = [t for t in targets if not os.path.lexists(t)]
    if installables:
        if not all("#" in t or t.startswith("/nix/store/") for t in installables):
            missing = next(t for t in installables if "#" not in t)
            raise UsageError(f"target not found: {missing} (a path, a result link, or an installable like .#torch)")
        paths += options.read_closure(installables, None, build).roots
    return paths
