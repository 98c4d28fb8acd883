# CUDA package sets from NVIDIA's redistributables, split into outputs:
# cudaPackages_12_9, cudaPackages_13_0, and cudaPackages (13.0). Brings the
# options and hooks it needs, so it also works on its own.
final: prev:
let
  sets = final: prev: {
    cudaPackages_12_9 = final.callPackage ../pkgs/cuda { cudaMajorMinorVersion = "12.9"; };
    cudaPackages_13_0 = final.callPackage ../pkgs/cuda { cudaMajorMinorVersion = "13.0"; };
    cudaPackages = final.cudaPackages_13_0;
  };
in
prev.lib.composeManyExtensions [
  (import ./options.nix)
  (import ./hooks.nix)
  sets
] final prev
