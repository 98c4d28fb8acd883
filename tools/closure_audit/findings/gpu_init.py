"""Judge what a framework opens by name once imported (loader/process.py's
`Process.opened`): TensorFlow's GPU initialisation dlopens its CUDA
libraries from libtensorflow_framework.so.2, and when one fails it skips
registering GPU devices and runs on the CPU, with no error. One finding per
framework and opener, naming every library its search path misses, the
tree's copy where it holds one, and the import order in which another
framework's loads give it its GPU (the union, either way round).
"""

from __future__ import annotations

import os

from ..loader.process import UNION, Process
from .collector import Findings


def judge_gpu_init(processes: list[Process], findings: Findings, providers: dict[str, list[str]], inside) -> None:
    unions = [p for p in processes if p.name == UNION]
    unions += [p.reverse for p in unions if p.reverse is not None]
    for proc in processes:
        if proc.name == UNION:
            continue
        missing: dict[str, list] = {}
        for preload, got in proc.opened:
            if got is None:
                missing.setdefault(preload.opener, []).append(preload)
        for opener, preloads in sorted(missing.items()):
            names = [p.path for p in preloads]
            copies = {n: [c for c in providers.get(n, []) if inside(c)] for n in names}
            held = "; ".join(f"the tree holds {c[0]}" for n, c in copies.items() if c)
            rescue = next((u for u in unions if all(
                got is not None for p, got in u.opened if p.opener == opener and p.path in names)
                and any(p.opener == opener for p, _ in u.opened)), None)
            order = (f"; imported as {', then '.join(rescue.frameworks)}, the libraries loaded before answer "
                     f"{'it' if len(names) == 1 else 'them'} and it gets its GPU") if rescue is not None else ""
            first = preloads[0]
            findings.add("gpu-init-library-missing", opener,
                         f"{proc.name}: at {first.trigger}, {os.path.basename(opener)} dlopens {', '.join(names)}, "
                         f"which its search path (its own RUNPATH, then the host's directories) does not find"
                         f"{' (' + held + ')' if held else ''}: {proc.name} skips registering GPU devices and runs "
                         f"on the CPU, without an error{order}",
                         framework=proc.name, missing=names, tree_copies=[c[0] for c in copies.values() if c],
                         rescued_by=list(rescue.frameworks) if rescue is not None else None)
