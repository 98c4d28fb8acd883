"""`closure-audit archs`: the GPU code inside every ELF file of the targets,
judged against the capabilities a build was meant for (docs/commands/archs.md)."""

from __future__ import annotations

import argparse

from .. import output
from ..cuda.request import from_nix_config, make_request
from ..errors import UsageError
from ..output import progress
from ..targets import resolve_target, scope_of
from . import options


def add_arguments(p) -> None:
    p.description = ("List the GPU code objects (cubin, PTX, LTO IR) inside every ELF file of the targets; with "
                     "requested capabilities, report what is missing and what no requested GPU can use "
                     "(docs/commands/archs.md).")
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a file, a directory, a Nix store path or result symlink; with --closure, also an "
                        "installable (.#attr)")
    p.add_argument("--capabilities", metavar="LIST", help="requested CUDA capabilities: 8.6,9.0 (9.0a, 10.0f)")
    p.add_argument("--forward-compat", action=argparse.BooleanOptionalAction, default=None,
                   help="also require PTX for GPUs newer than those requested (default: off for --capabilities, "
                        "the source's setting otherwise)")
    p.add_argument("--from-nix-config", nargs="?", const="", metavar="FILE",
                   help="read cudaCapabilities and cudaForwardCompat from a nixpkgs config "
                        "(default: the one nixpkgs reads: $NIXPKGS_CONFIG, ~/.config/nixpkgs/config.nix)")
    options.add_policy(p, "TOML policy; [gpu] can hold the capabilities (docs/reference/policy.md)")
    p.add_argument("--deep", action="store_true",
                   help="also search the rest of every file for containers (without it: fatbin sections, and "
                        ".ldata, .lrodata, .rodata, .cask_resource of libraries with device code); reads whole files")
    p.add_argument("--kernels", action="store_true",
                   help="count the kernels of every code object (reads and decompresses every payload; without "
                        "it, only those the judgement needs are read)")
    p.add_argument("--closure", action="store_true", help="scan every path of the targets' Nix closures")
    options.add_build(p, "with --closure: build installables that are not built yet")
    options.add_json(p)


def gpu_request(args, policy):
    """The requested capabilities: --capabilities, else --from-nix-config, else
    the policy's [gpu] table, else none."""
    if args.capabilities is not None and args.from_nix_config is not None:
        raise UsageError("give --capabilities or --from-nix-config, not both")
    if args.capabilities is not None:
        request = make_request(args.capabilities.split(","), bool(args.forward_compat), "--capabilities")
    elif args.from_nix_config is not None:
        request = from_nix_config(args.from_nix_config or None)
    elif policy.gpu_capabilities is not None:
        request = make_request(list(policy.gpu_capabilities), policy.gpu_forward_compat, f"policy {args.policy}")
    elif args.forward_compat is not None:
        raise UsageError("--forward-compat needs capabilities (--capabilities, --from-nix-config or a policy)")
    else:
        return None
    if args.forward_compat is not None and request.forward_compat != args.forward_compat:
        request = request._replace(forward_compat=args.forward_compat)
    return request


def run(args) -> int:
    from ..ops import archs

    policy = options.load_policy(args)
    request = gpu_request(args, policy)
    targets, roots = args.targets, None
    if args.closure:
        closure = options.read_closure(args.targets, None, args.build)
        targets, roots = [p for p in closure.paths if closure.on_disk(p)], closure.roots
    elif args.build:
        raise UsageError("--build needs --closure")
    scope = scope_of([resolve_target(t, installables=False) for t in targets])
    result = archs.run(archs.Options(scope, policy, request, args.deep, args.kernels, roots), progress.progress)
    return output.show(result, json=args.json)
