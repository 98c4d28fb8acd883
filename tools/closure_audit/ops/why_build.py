"""`why-build`: what Nix will build instead of fetching for the targets, and
the root causes of the rebuild, explained against REF when one is given."""

from __future__ import annotations

from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor

from ..drv.plan import open_substituters, why_build
from . import result_type

# targets, like: .drv paths (commands/ resolved them; like may be None);
# stores: the --store URLs, None for Nix's substituters; keys:
# --trusted-public-keys; workers: requests in flight; given: the targets as
# the user wrote them, for the Markdown summary.
Options = namedtuple("Options", "targets like stores keys refresh workers given")

Result = result_type("why-build", "given targets plan names causes", """given: as in Options;
targets: the .drv paths; plan, names, causes: as drv.plan.why_build gives
them. Failed: something to build.""", lambda r: bool(r.plan.build))


def run(options: Options) -> Result:
    targets, like = list(dict.fromkeys(options.targets)), options.like
    # Opening the caches waits a round trip for each nix-cache-info: taken while the graphs are read.
    with ThreadPoolExecutor(1, thread_name_prefix="caches") as opener:
        opening = opener.submit(open_substituters, options.stores, options.keys, options.refresh, options.workers)
        try:
            plan, names, causes = why_build(targets, like, opening.result)
        finally:
            if opening.exception() is None:
                opening.result().close()
    return Result(options.given, targets, plan, names, causes)
