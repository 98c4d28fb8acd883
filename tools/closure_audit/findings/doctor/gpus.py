"""The GPU checks: the GPUs this host has, and on each whether the target's
GPU code runs (a cubin for it, PTX to JIT-compile, or nothing).

Takes: the Page with the Host's GPUs, a target's TargetFacts (its
kernels). Gives: the GPU checks on the page (findings/gpu.py's verdict
per GPU).
"""

from __future__ import annotations

from ...cuda.code import capability_table, runs_on
from ...cuda.driver import parse_version
from ..gpu import verdict
from .facts import Fix, TargetFacts
from .fixes import wheels
from .page import Page


def gpus(page: Page) -> list[tuple[str, tuple[int, int]]]:
    h = page.host
    if not h.gpus:
        why = f"nvidia-smi failed: {h.smi_error}" if h.smi_error else (
            "no nvidia-smi on PATH and no /proc/driver/nvidia/gpus" if h.smi is None else "nvidia-smi lists none")
        page.line("gpus", f"no NVIDIA GPU found ({why})", rule="gpu-not-found",
                  fixes=[Fix("check that the GPU is seen: lspci | grep -i nvidia; in a container, start it "
                             "with --gpus all")])
        return []
    out = []
    for i, g in enumerate(h.gpus):
        if g.capability is None:
            page.line("gpus", f"GPU {i}: {g.name}, compute capability unknown ({g.source})",
                      rule="gpu-capability-unknown", file=g.source)
            continue
        if g.model_capability is not None and g.model_capability != g.capability:
            page.line("gpus", f"GPU {i}: {g.name}, compute capability {g.capability} ({g.source}); the model "
                      f"table gives {g.model_capability} for {g.model!r} ({g.model_source}): {g.source}'s "
                      f"{g.capability} is used", rule="gpu-capability-mismatch", file=g.model_source or "",
                      capability=g.capability, model_capability=g.model_capability)
        else:
            page.line("gpus", f"GPU {i}: {g.name}, compute capability {g.capability} ({g.source})")
        out.append((f"GPU {i} ({g.name}, {g.capability})", g.device))
    return out

def gpu_code(page: Page, target: TargetFacts, devices: list[tuple[str, tuple[int, int]]]) -> None:
    if not devices:
        return
    files = {f: k.codes() for f, k in target.gpu_code.items() if k.groups}
    if not files:
        page.line("gpu-code", "the target holds no GPU code")
        return
    for label, device in devices:
        cap = f"{device[0]}.{device[1]}"
        how = {f: verdict(target.gpu_code[f], codes, device, runs_on) for f, codes in files.items()}
        none = sorted(f for f, (v, _) in how.items() if v == "missing")
        jit = sorted(f for f, (v, _) in how.items() if v == "jit")
        if none:
            example = files[none[0]]
            have = ", ".join(sorted({c.name for c in example if c.kind != "lto"}))
            page.line("gpu-code", f"{label}: nothing in {len(none)} of {len(files)} files with GPU code runs on "
                      f"it ({none[0]} has {have}): CUDA fails with \"no kernel image is available for "
                      "execution on the device\"", rule="no-kernel-image", file=none[0], capability=cap,
                      files=none, fixes=_arch_fixes(cap, target))
        elif jit:
            ptx = max(how[jit[0]][1], key=lambda c: (c.major, c.minor))
            page.line("gpu-code", f"{label}: {len(jit)} of {len(files)} files run on it only by JIT-compiling "
                      f"PTX ({ptx.name}) at first start ({jit[0]})", rule="jit-only-gpu-arch", file=jit[0],
                      capability=cap, ptx=ptx.name, fixes=_arch_fixes(cap, target)[:1])
        else:
            idle = sum(1 for v, _ in how.values() if v == "idle")
            page.line("gpu-code", f"{label}: every one of {len(files) - idle} files with GPU kernels has a cubin "
                      f"for it" + (f" ({idle} more hold GPU code that defines no kernel)" if idle else ""))

def _arch_fixes(cap: str, target: TargetFacts) -> list[Fix]:
    """How to get GPU code for `cap`: in the Nix way for a store path, in
    the pip way for a tree; from an older CUDA when the target's no longer
    builds for it."""
    runtime = target.release
    last = capability_table().get(cap, {}).get("last")
    too_new = bool(last and runtime and parse_version(last) < runtime)
    sm = f"sm_{cap.replace('.', '')}"
    if target.nix:
        setting = f'cudaCapabilities = [ "{cap}" ] in the nixpkgs config (beside the others you need)'
        if too_new:
            return [Fix(f"CUDA {runtime[0]}.{runtime[1]} no longer builds for {cap} (the last that does is CUDA "
                        f"{last}): build with cudaPackages_{last.replace('.', '_')} and {setting}",
                        "an older CUDA release")]
        return [Fix(f"rebuild with {setting}", "more GPU code: a larger closure and a longer build")]
    if too_new:
        old = parse_version(last)
        return [Fix(f"CUDA {runtime[0]}.{runtime[1]} no longer builds for {cap} (the last that does is CUDA "
                    f"{last}): install {wheels((old[0], old[1]), target.torch)}, with {sm} code",
                    "an older CUDA release")]
    return [Fix(f"install a build with {sm} code (for PyTorch: one whose torch.cuda.get_arch_list() has {sm}, "
                f"an older sm_{cap.split('.')[0]}x, or PTX at or below it), or build it from source with "
                f"TORCH_CUDA_ARCH_LIST=\"{cap}\"", "more GPU code: larger wheels, or a long build")]
