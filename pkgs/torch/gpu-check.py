"""The first test of a CUDA PyTorch on a GPU (passthru.gpuCheck).

Checks that CUDA is available, multiplies matrices, checks
sin(x)**2 + cos(x)**2 == 1 on a 10000x10000 tensor on the GPU against the
CPU, prints the speedup, and checks that the device's capability is covered by
the architectures the build holds (cubins, or PTX the driver can compile).
Exit status 1 on any failure, with a line saying which.
"""

from __future__ import annotations

import sys
import time


def fail(message: str) -> None:
    print(f"gpu-check: FAIL: {message}")
    sys.exit(1)


def timed(fn, sync) -> float:
    fn()  # warm up: kernels load, the driver JIT-compiles PTX if it has to
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def main() -> None:
    import torch

    from closure_audit.cuda.code import covers, parse_code

    if not torch.cuda.is_available():
        fail("torch.cuda.is_available() is False (no GPU, or the driver was not found)")
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    capability = torch.cuda.get_device_capability(device)
    built = [c for c in (parse_code(a) for a in torch.cuda.get_arch_list()) if c is not None]
    usable = covers(built, capability)
    print(f"device: {name}, capability {capability[0]}.{capability[1]}")
    print(f"built for: {' '.join(c.name for c in built)}")
    if not usable:
        fail(f"nothing in the build runs on capability {capability[0]}.{capability[1]}")
    print(f"runs as: {usable[0].name}")

    a = torch.randn(4096, 4096, device=device)
    b = torch.randn(4096, 4096, device=device)
    product = a @ b
    if not torch.allclose(product.cpu(), a.cpu() @ b.cpu(), rtol=1e-3, atol=1e-2):
        fail("matrix product on the GPU differs from the CPU's")

    x_cpu = torch.rand(10000, 10000)
    x_gpu = x_cpu.to(device)
    ones = torch.ones(10000, 10000, device=device)

    def identity(x):
        return torch.sin(x) ** 2 + torch.cos(x) ** 2

    if not torch.allclose(identity(x_gpu), ones):
        fail("sin(x)**2 + cos(x)**2 is not 1 on the GPU")
    cpu = timed(lambda: identity(x_cpu), lambda: None)
    gpu = timed(lambda: identity(x_gpu), torch.cuda.synchronize)
    print(f"sin^2 + cos^2 on 10000x10000: CPU {cpu * 1000:.1f} ms, GPU {gpu * 1000:.1f} ms, "
          f"speedup {cpu / gpu:.1f}x")
    print("gpu-check: OK")


if __name__ == "__main__":
    main()
