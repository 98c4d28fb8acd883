"""The setting behind a difference between two derivations: the table in
lib/data/cuda-settings.json (docs/nix/options.md), applied to derivations that
differ as nixpkgs' CUDA packages do when one option changes."""

from __future__ import annotations

from closure_audit.drv.derivation import Derivation
from closure_audit.drv.likeness import differences, find_like, settings

STORE = "/nix/store/"


def drv(name: str, env: dict | None = None, inputs: tuple[str, ...] = ()) -> Derivation:
    h = f"{abs(hash((name, tuple(sorted((env or {}).items())), inputs))):032d}"[:32].translate(
        str.maketrans("0123456789", "abcdfghijk"))
    return Derivation(path=f"{STORE}{h}-{name}.drv", outputs={"out": f"{STORE}{h}-{name}"},
                      input_drvs={f"{STORE}{'a' * 31}{i[0]}-{i}.drv": ("out",) for i in inputs}, input_srcs=(),
                      system="x86_64-linux", builder="/bin/sh", args=("-e", "builder.sh"),
                      env={"name": name, **(env or {})})


def pairs(old: Derivation, new: Derivation):
    return [(s.setting, s.old, s.new) for s in settings(differences(old, new))]


def test_forward_compat_is_the_ptx_alone():
    old = drv("torch-2.9.0", {"TORCH_CUDA_ARCH_LIST": "8.6;9.0+PTX",
                              "cmakeFlags": "-GNinja -DCMAKE_CUDA_ARCHITECTURES=86-real;90-real;90-virtual"})
    new = drv("torch-2.9.0", {"TORCH_CUDA_ARCH_LIST": "8.6;9.0",
                              "cmakeFlags": "-GNinja -DCMAKE_CUDA_ARCHITECTURES=86-real;90-real"})
    assert pairs(old, new) == [("cudaForwardCompat", "8.6;9.0+PTX", "8.6;9.0"),
                               ("cudaForwardCompat", "86-real;90-real;90-virtual", "86-real;90-real")]


def test_capabilities_in_cmake_flags_and_torch_arch_list():
    old = drv("magma-2.9.0", {"cmakeFlags": "-GNinja -DCMAKE_CUDA_ARCHITECTURES=86-real;90-real;90-virtual",
                              "TORCH_CUDA_ARCH_LIST": "8.6;9.0+PTX"})
    new = drv("magma-2.9.0", {"cmakeFlags": "-GNinja -DCMAKE_CUDA_ARCHITECTURES=89-real;89-virtual",
                              "TORCH_CUDA_ARCH_LIST": "8.9+PTX"})
    assert pairs(old, new) == [("cudaCapabilities", "8.6;9.0+PTX", "8.9+PTX"),
                               ("cudaCapabilities", "86-real;90-real;90-virtual", "89-real;89-virtual")]
    # Other flags changing is no CUDA setting.
    other = drv("magma-2.9.0", {"cmakeFlags": "-GMake -DCMAKE_CUDA_ARCHITECTURES=86-real;90-real;90-virtual",
                                "TORCH_CUDA_ARCH_LIST": "8.6;9.0+PTX"})
    assert pairs(old, other) == []
    assert [d.setting for d in differences(old, other)] == [None]


def test_package_set_and_nixpkgs_revision():
    old = drv("onnxruntime-1.22.0", inputs=("cuda12.9-cudart-12.9.79", "cuda12.9-libcublas-12.9.1.4",
                                            "gcc-wrapper-13.3.0", "cmake-3.31.6"))
    new = drv("onnxruntime-1.22.0", inputs=("cuda13.0-cudart-13.0.88", "cuda13.0-libcublas-13.0.2.14",
                                            "gcc-wrapper-14.2.0", "cmake-3.31.6"))
    assert pairs(old, new) == [("cudaPackages", "12.9", "13.0"),
                               ("nixpkgs revision", "gcc-wrapper-13.3.0", "gcc-wrapper-14.2.0")]


def test_like_by_name_then_without_the_package_set():
    ref = {d.path: d for d in (drv("cuda12.9-nccl-2.28.3"), drv("magma-2.9.0"))}
    assert find_like(drv("magma-2.9.0", {"x": "1"}), ref).name == "magma-2.9.0"
    assert find_like(drv("cuda13.0-nccl-2.28.3"), ref).name == "cuda12.9-nccl-2.28.3"
    assert find_like(drv("torch-2.9.0"), ref) is None
