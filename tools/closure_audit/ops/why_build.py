"""`why-build`: what Nix will build instead of fetching for the targets, and
the root causes of the rebuild, explained against REF when one is given."""

from __future__ import annotations

from collections import namedtuple

from ..drv.derivation import instantiate
from ..drv.plan import open_substituters, why_build

# targets, like: .drv paths or installables; stores: the --store URLs, None
# for Nix's substituters; keys: --trusted-public-keys; workers: requests in flight.
Options = namedtuple("Options", "targets like stores keys refresh workers")
# targets: the .drv paths; plan, names, causes: as closure.plan.why_build gives them.
Result = namedtuple("Result", "targets plan names causes")


def run(options: Options) -> Result:
    targets = list(dict.fromkeys(instantiate(t) for t in options.targets))
    like = None if options.like is None else instantiate(options.like)
    substituters = open_substituters(options.stores, options.keys, options.refresh, options.workers)
    try:
        plan, names, causes = why_build(targets, like, substituters, options.workers)
    finally:
        substituters.close()
    return Result(targets, plan, names, causes)
