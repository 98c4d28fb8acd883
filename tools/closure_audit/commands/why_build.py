"""`closure-audit why-build`: what Nix will build instead of fetching, and
the setting that caused it (docs/commands/why-build.md)."""

from __future__ import annotations

from .. import output
from ..output.markdown import check_markdown_option
from ..errors import UsageError
from ..targets import resolve_derivation
from . import options


def add_arguments(p) -> None:
    p.description = ("closure-audit why-build: the derivations Nix will build and the paths it will fetch for "
                     "TARGET, the root causes of the rebuild and, with --like REF, how each differs from the "
                     "same derivation as the cache builds it (docs/commands/why-build.md).")
    p.add_argument("targets", nargs="+", metavar="TARGET", help="a .drv store path or an installable")
    p.add_argument("--like", metavar="REF", action="append",
                   help="the same thing as the cache builds it (a .drv or an installable): each root cause is "
                        "compared with the first REF's derivation of the same name; repeatable: with --gpu, "
                        "each REF is a candidate judged on the GPUs")
    p.add_argument("--gpu", metavar="CC[,CC...]|host",
                   help="judge whether TARGET and each REF run on these GPUs (8.9 or sm_89; host: this machine's)")
    p.add_argument("--driver", metavar="VERSION|host",
                   help="with --gpu: the driver, as a CUDA version (13.0) or its own (580.65.06); host: this "
                        "machine's; default: a current driver")
    p.add_argument("--store", metavar="URL", action="append",
                   help="a binary cache to consult (file://, http://, https://), repeatable; default: Nix's "
                        "configured substituters")
    options.add_cache_options(p, "for every cache read (--store, else Nix's substituters)")
    options.add_json(p)
    options.add_markdown(p)


def gpus_and_driver(args):
    """(GPUs, where they came from, driver's CUDA release or None, where it
    came from) from --gpu and --driver; UsageError for what is not one."""
    from ..cuda.ptx import parse_driver
    from ..cuda.request import parse_gpus

    if args.gpu is None:
        if args.driver is not None:
            raise UsageError("--driver needs --gpu")
        return (), None, None, None
    host = None
    if "host" in (args.gpu.strip(), (args.driver or "").strip()):
        from ..host.probe import probe

        host = probe()
    if args.gpu.strip() == "host":
        gpus = sorted({g.device for g in host.gpus if g.device is not None})
        if not gpus:
            raise UsageError("--gpu host: this machine shows no NVIDIA GPU (nvidia-smi, /proc/driver/nvidia); "
                             "name the capabilities: --gpu 8.9")
        gpu_source = "this machine's GPUs"
    else:
        gpus, gpu_source = parse_gpus(args.gpu), "--gpu"
    if args.driver is None:
        return gpus, gpu_source, None, "none given: a current driver is assumed"
    if args.driver.strip() == "host":
        version = host.driver.version if host.driver is not None else None
        if version is None:
            raise UsageError("--driver host: this machine has no NVIDIA driver whose version can be read; "
                             "name one: --driver 13.0")
        text, source = version, f"this machine's driver {version}"
    else:
        text, source = args.driver, "--driver"
    try:
        return gpus, gpu_source, parse_driver(text), source
    except ValueError as exc:
        raise UsageError(f"--driver: {exc}") from None


def run(args) -> int:
    from ..ops import why_build

    check_markdown_option(args.markdown, args.json)
    workers = options.http_connections(args)
    gpus, gpu_source, driver, driver_source = gpus_and_driver(args)
    targets = [resolve_derivation(t).path for t in args.targets]
    likes = [(resolve_derivation(r).path, r) for r in args.like or []]
    like = likes[0][0] if likes else None
    result = why_build.run(why_build.Options(targets, like, args.store, args.trusted_public_keys, args.refresh,
                                             workers, args.targets, likes, gpus, driver, gpu_source,
                                             driver_source))
    return output.show(result, json=args.json, markdown=args.markdown)
