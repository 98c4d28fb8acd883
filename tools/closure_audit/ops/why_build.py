"""`why-build`: what Nix will build instead of fetching for the targets, and
the root causes of the rebuild, explained against REF when one is given."""

from __future__ import annotations

from collections import namedtuple

from ..drv.plan import open_substituters, why_build

# targets, like: .drv paths (commands/ resolved them; like may be None);
# stores: the --store URLs, None for Nix's substituters; keys:
# --trusted-public-keys; workers: requests in flight.
Options = namedtuple("Options", "targets like stores keys refresh workers")
# targets: the .drv paths; plan, names, causes: as drv.plan.why_build gives them.
Result = namedtuple("Result", "targets plan names causes")


def run(options: Options) -> Result:
    targets, like = list(dict.fromkeys(options.targets)), options.like
    substituters = open_substituters(options.stores, options.keys, options.refresh, options.workers)
    try:
        plan, names, causes = why_build(targets, like, substituters, options.workers)
    finally:
        substituters.close()
    return Result(targets, plan, names, causes)
