# What the output lists cannot say, in nixpkgs' style
# (pkgs/development/cuda-modules/_cuda/fixups): per redistributable, a function
# of its previous attributes, applied with overrideAttrs. The inputs come from
# the final package set, so a member of one CUDA release's set only ever
# depends on members of the same set.
#
# allowFHSReferences: compiled-in default paths (/usr/include, /usr/lib/debug,
# /usr/share/zoneinfo), found by searching NVIDIA's 12.9 and 13.0 wheels for
# "/usr/"; the split hook's FHS check would refuse these packages for strings
# they cannot drop.
{
  lib,
  cudaPackages,
}:
let
  inherit (cudaPackages) cudaMajorMinorVersion;
  atLeast = lib.versionAtLeast cudaMajorMinorVersion;
  # Run-time dependencies inside the set, for autoPatchelf.
  needs = deps: prevAttrs: { buildInputs = prevAttrs.buildInputs ++ map lib.getLib deps; };
  allowFHS = _: { allowFHSReferences = true; };
in
{
  libcusolver = needs [
    cudaPackages.libcublas
    cudaPackages.libcusparse
    cudaPackages.libnvjitlink
  ];
  libcusparse = needs [ cudaPackages.libnvjitlink ];
  libcufft = needs [ cudaPackages.libnvjitlink ];
  cudnn =
    prevAttrs:
    needs [
      cudaPackages.libcublas
      cudaPackages.cuda_nvrtc
    ] prevAttrs
    // allowFHS prevAttrs;

  # CUDA 13 ships CCCL under include/cccl; nixpkgs' cuda_nvcc points nvcc at
  # cuda_cccl's include directory itself, as nixpkgs' cuda_cccl lays it out
  # (pkgs/development/cuda-modules/packages/cuda_cccl.nix).
  cuda_cccl =
    prevAttrs:
    lib.optionalAttrs (atLeast "13.0") {
      prePatch = (prevAttrs.prePatch or "") + ''
        rm -rf include/nv
        mv include/cccl/* include/
        rmdir include/cccl
      '';
    };

  # cuda_runtime.h includes crt/host_config.h (in cuda_nvcc before CUDA 13, in
  # cuda_crt from 13) and CCCL's <nv/target>: propagated as nixpkgs'
  # cuda_cudart propagates them (pkgs/development/cuda-modules/packages/cuda_cudart.nix).
  cuda_cudart = prevAttrs: {
    propagatedBuildInputs =
      (prevAttrs.propagatedBuildInputs or [ ])
      ++ [
        (lib.getOutput "include" (if atLeast "13.0" then cudaPackages.cuda_crt else cudaPackages.cuda_nvcc))
        (lib.getOutput "include" cudaPackages.cuda_cccl)
      ];
  };

  cuda_crt = allowFHS;
  cuda_cupti = allowFHS;
  cuda_nvcc = allowFHS;
  cuda_nvrtc = allowFHS;
  cuda_sanitizer_api = allowFHS;
  libnvvm = allowFHS;
}
