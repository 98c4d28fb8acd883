"""redist-features ARCHIVE_OR_DIR... [--json]
redist-features manifest MANIFEST SOURCE... [--json]

Exit status 0, or 2 with a one-line error for anything that cannot be read
(and for archives whose member names escape the archive)."""

from __future__ import annotations

import argparse
import json
import sys

from closure_audit.util import reader_gone
from closure_audit.errors import Exit, InputError

from . import __version__
from .inspect import inspect


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "manifest":
            status = _manifest(argv[1:])
            sys.stdout.flush()
            return status
        p = _Parser(prog="redist-features", description="Which outputs NVIDIA redistributables fill. "
                    "`redist-features manifest --help`: the output list of a whole release.")
        p.add_argument("--version", action="version", version=f"redist-features {__version__}")
        p.add_argument("sources", nargs="+", metavar="ARCHIVE_OR_DIR",
                       help="a redist tarball (.tar.xz), a wheel (.whl) or an unpacked directory")
        p.add_argument("--json", action="store_true",
                       help="print JSON, schema redist-features/1 (docs/nix/redist-features.md)")
        args = p.parse_args(argv)
        results = [inspect(s) for s in args.sources]
        if args.json:
            print(json.dumps({"schema": "redist-features/1", "packages": [r.to_json() for r in results]}, indent=2))
        else:
            for r in results:
                counts = ", ".join(f"{o} ({r.files[o]})" for o in r.outputs) or "nothing but out"
                print(f"{r.source.package} {r.source.version or ''} [{r.source.kind}]: {counts}")
        sys.stdout.flush()
        return Exit.OK
    except InputError as exc:
        print(f"redist-features: error: {exc}", file=sys.stderr)
        return Exit.USAGE
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:
        return reader_gone()


def _manifest(argv: list[str]) -> int:
    from .manifest import generate

    p = _Parser(prog="redist-features manifest",
                description="The output list of a release: every package of MANIFEST found among the SOURCEs "
                            "(its redist archives, or NVIDIA's wheels of the same component versions).")
    p.add_argument("manifest", metavar="MANIFEST", help="NVIDIA's redistrib_<version>.json")
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="archives, wheels or directories holding them")
    p.add_argument("--cuda-variant", help="for cuDNN's manifest: the CUDA major version (12, 13)")
    p.add_argument("--json", action="store_true", help="(the output is always JSON)")
    args = p.parse_args(argv)
    print(json.dumps(generate(args.manifest, args.sources, args.cuda_variant), indent=2, sort_keys=True))
    return Exit.OK

