# CUDA package sets from NVIDIA's redistributables, split into outputs:
# cudaPackages_12_9, cudaPackages_13_0, and cudaPackages (13.0). Brings the
# options and hooks it needs, so it also works on its own.
#
# Where nixpkgs has a CUDA scope of the same release, the set extends it
# (overrideScope): the redistributables are nixcuda's, so every nixpkgs package
# built in the scope (NCCL, magma, ...) links against them, while the compiler
# (cuda_nvcc with the parts it runs, cuda_crt and libnvvm), its setup hooks and
# backendStdenv stay nixpkgs'. Elsewhere the set stands alone.
final: prev:
let
  toolchain = [
    "cuda_nvcc"
    "cuda_crt"
    "libnvvm"
  ];
  mkSet =
    version: base:
    let
      inherit (final.callPackage ../pkgs/cuda { cudaMajorMinorVersion = version; }) members;
    in
    if base != null && base ? overrideScope then
      base.overrideScope (
        cfinal: cprev:
        let
          ours = members cfinal;
        in
        builtins.removeAttrs ours toolchain // { flags = (cprev.flags or { }) // ours.flags; }
      )
    else
      prev.lib.fix members;
  sets = final: prev: {
    cudaPackages_12_9 = mkSet "12.9" (prev.cudaPackages_12_9 or null);
    cudaPackages_13_0 = mkSet "13.0" (prev.cudaPackages_13_0 or null);
    cudaPackages = final.cudaPackages_13_0;
  };
in
prev.lib.composeManyExtensions [
  (import ./options.nix)
  (import ./hooks.nix)
  sets
] final prev
