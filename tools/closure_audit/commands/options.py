"""Arguments that several commands take, and what they resolve to."""

from __future__ import annotations

import argparse

from ..cache import HTTP_CONNECTIONS
from ..closure import CLOSURE_TARGETS
from ..errors import UsageError
from ..policy import load as policy
from ..targets import resolve_target


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the JSON report (docs/reference/json.md)")


def add_policy(p: argparse.ArgumentParser, what: str = "TOML policy (docs/reference/policy.md)") -> None:
    p.add_argument("--policy", metavar="FILE", help=what)


def add_build(p: argparse.ArgumentParser, help: str = "build installables that are not built yet") -> None:
    p.add_argument("--build", action="store_true", help=help)


def add_markdown(p: argparse.ArgumentParser) -> None:
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown summary ('-': to standard output, "
                   "instead of the terminal report); $GITHUB_STEP_SUMMARY, when set, gets it with or "
                   "without this option")


def add_path_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("--path-info", metavar="FILE",
                   help="read the closure from a saved `nix path-info --json --recursive` dump")


def add_closure_inputs(p: argparse.ArgumentParser) -> None:
    """--path-info, --build and --json: how the closure commands read a closure."""
    add_path_info(p)
    add_build(p)
    add_json(p)


def add_store(p: argparse.ArgumentParser, evidence_option: bool = False) -> None:
    """--store URL and what goes with it (docs/commands/store.md)."""
    p.add_argument("--store", metavar="URL",
                   help="read closures from a Nix binary cache (file:///DIR, http://HOST[:PORT][/PREFIX], https://...) "
                        "instead of the local store; targets are then full store paths (docs/commands/store.md)")
    add_cache_options(p)
    if evidence_option:
        p.add_argument("--evidence", action="store_true",
                       help="with --store: stream the NARs of each chain's hops for byte-level evidence "
                            "(without it, no NAR is downloaded)")


def add_cache_options(p: argparse.ArgumentParser, scope: str = "with --store") -> None:
    """How binary caches are read: signatures, the local narinfo cache,
    connections; `scope` says which caches (why-build also reads Nix's
    substituters without --store)."""
    p.add_argument("--trusted-public-keys", metavar="KEYS",
                   help=f"{scope}: 'NAME:BASE64 ...', as Nix's setting; every narinfo must then carry a "
                        "valid signature by one of them")
    p.add_argument("--refresh", action="store_true",
                   help=f"{scope}: fetch every narinfo again, ignoring the local narinfo cache")
    p.add_argument("--http-connections", type=int, metavar="N",
                   help=f"{scope}: requests in flight at once, over as many connections (default "
                        f"{HTTP_CONNECTIONS})")


def open_store(args, evidence: bool):
    """A function reading closures from the binary cache of --store, or None
    without --store. `evidence`: whether the NARs are streamed for evidence."""
    cache = open_cache(args)
    if cache is None:
        return None
    from ..cache.evidence import read_closure

    return lambda roots: read_closure(cache, roots, evidence)


def open_cache(args):
    """The binary cache of --store (cache.binary.BinaryCache), or None
    without --store, where the options that go with it are refused."""
    if args.store is None:
        for flag, given in (("--trusted-public-keys", args.trusted_public_keys is not None),
                            ("--refresh", args.refresh), ("--http-connections", args.http_connections is not None),
                            ("--evidence", getattr(args, "evidence", False))):
            if given:
                raise UsageError(f"{flag} needs --store")
        return None
    connections = http_connections(args)
    if getattr(args, "path_info", None):  # FILE, or the gate's NAME=FILE list
        raise UsageError("--store reads closures from the binary cache: give no --path-info")
    if getattr(args, "build", False):
        raise UsageError("--store reads closures from the binary cache: nothing is built (no --build)")
    from ..cache.binary import BinaryCache
    from ..cache.signatures import parse_public_keys

    keys = None if args.trusted_public_keys is None else parse_public_keys(args.trusted_public_keys)
    return BinaryCache(args.store, keys, workers=connections, refresh=args.refresh)


def http_connections(args) -> int:
    connections = HTTP_CONNECTIONS if args.http_connections is None else args.http_connections
    if connections < 1:
        raise UsageError("--http-connections must be at least 1")
    return connections


def read_closure(target: str | list[str] | None, path_info: str | None, build: bool, store=None):
    """The closure a command was given: a saved dump named as the one target,
    a dump given with --path-info (the targets then pick its roots), store
    paths, result links and installables, or with `store` (open_store) store
    paths in a binary cache."""
    from ..closure.graph import load_closure, load_dump

    targets = [] if target is None else [target] if isinstance(target, str) else list(target)
    if store is not None:
        if not targets:
            raise UsageError("with --store, a TARGET store path is required")
        return store(targets)
    if path_info is not None:
        return load_closure(targets, path_info)  # the dump's own paths: named, not resolved here
    if not targets:
        raise UsageError("a TARGET or --path-info FILE is required")
    resolved = [resolve_target(t, build, closure=True) for t in targets]
    if len(resolved) == 1 and resolved[0].is_dump:
        return load_dump(resolved[0].given, [])
    return load_closure([t.closure_root() for t in resolved])


def closure_reader(build: bool, store=None):
    """A function reading the closure of one target a budgets file names (a
    store path, a result link, an installable; with `store`, a store path in
    the binary cache)."""
    def read(what: str):
        if store is not None:
            return store([what])
        from ..closure.graph import query

        return query([resolve_target(what, build).closure_root()])
    return read


def load_policy(args):
    return policy.load_policy(args.policy)


def add_import_order(p) -> None:
    p.add_argument("--import-order", metavar="A,B[,...]", type=import_order,
                   help="the frameworks the union process imports first, in this order (default: torch first, "
                        "then the others by name); what the reverse order changes is a finding")


def import_order(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"a comma-separated list of framework names, not {text!r}")
    return names
