"""`closure-audit doctor [TARGET...]`: will CUDA programs of TARGET run on
this host, and if not, the exact fix (docs/commands/doctor.md).

Resolves the targets, then ops/doctor.py reads the host under --host-root
(host/), reads and resolves the targets as `audit` does
(the driver library each object would load, the CUDA runtime, the GPU code)
and judges (findings/doctor/)."""

from __future__ import annotations

import os
import sys

from .. import output
from ..errors import UsageError
from ..output import progress
from ..targets import resolve_target, scopes_by_mode
from . import options


def add_arguments(p) -> None:
    p.description = ("Check that CUDA programs of the targets will run on this host: the host's kind, the driver "
                     "library the targets would load, the driver's versions against the kernel module and the "
                     "CUDA runtime, and the GPUs against the GPU code compiled in. Without a target, the host "
                     "alone. Each problem comes with its fixes (docs/commands/doctor.md).")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a store path, a result link, an installable (.#attr), or a venv or conda tree")
    host_root = p.add_mutually_exclusive_group()
    host_root.add_argument("--host-root", metavar="DIR", default="/",
                           help="read the host under DIR: every file and command the checks use (default /)")
    # `--root` names the tree in `audit`; here it was the host's, and stays for one release.
    host_root.add_argument("--root", metavar="DIR", dest="old_root",
                           help="deprecated spelling of --host-root, accepted for one release")
    options.add_policy(p)
    options.add_build(p)
    options.add_json(p)


def run(args) -> int:
    from ..ops import doctor

    flag, root = ("--root", args.old_root) if args.old_root is not None else ("--host-root", args.host_root)
    if flag == "--root":
        print("closure-audit: warning: doctor --root is deprecated: use --host-root", file=sys.stderr)
    if not os.path.isdir(root):
        raise UsageError(f"{flag} is not a directory: {root}")
    policy = options.load_policy(args)
    scopes = scopes_by_mode([resolve_target(t, args.build) for t in args.targets])
    result = doctor.run(doctor.Options(root, scopes, policy), progress.progress)
    return output.show(result, json=args.json)

