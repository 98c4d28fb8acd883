# The standardized CUDA options, read from nixpkgs' config:
#
#   cudaSupport        bool, default false
#   cudaCapabilities   list of strings ("8.6", "9.0a", "10.0f"), default [ ]: the
#                      CUDA release's default set (docs/nix/options.md)
#   cudaForwardCompat  bool, default true: also embed PTX for the highest capability
#
# `nixcuda.flagsFor cudaVersion` turns them into compiler flags, validated:
# a bad capability fails evaluation with every problem named at once.
final: prev:
let
  lib = import ../lib;
  config = prev.config or { };
in
{
  nixcuda = (prev.nixcuda or { }) // {
    inherit lib;
    cudaSupport = config.cudaSupport or false;
    cudaCapabilities = config.cudaCapabilities or [ ];
    cudaForwardCompat = config.cudaForwardCompat or true;
    flagsFor =
      cudaVersion:
      lib.cuda.flags {
        capabilities = final.nixcuda.cudaCapabilities;
        forwardCompat = final.nixcuda.cudaForwardCompat;
        inherit cudaVersion;
        system = final.stdenv.hostPlatform.system;
      };
  };
}
