# A CUDA package set's `flags`: this project's flags (./flags.nix) together
# with the names nixpkgs' packages read (formatCapabilities in
# pkgs/development/cuda-modules/_cuda/lib, plus the helpers
# pkgs/development/cuda-modules/default.nix adds), every one derived from the
# same capabilities, so no package of the set builds for other GPUs than
# another. nixpkgs' spellings of the same lists (realArches, realArchs) are
# both given: its own code has used each.
{ capabilities }:
flags:
let
  dropDots = builtins.replaceStrings [ "." ] [ "" ];
  ptx = if flags.ptxCapability == null then [ ] else [ "compute_${dropDots flags.ptxCapability}" ];
  arches = flags.realArchs ++ ptx;
  gencodeString = builtins.concatStringsSep " " flags.gencode;
in
flags
// {
  cudaCapabilities = flags.capabilities;
  cudaForwardCompat = flags.forwardCompat;
  realArches = flags.realArchs;
  virtualArches = flags.virtualArchs;
  inherit arches gencodeString;
  archs = arches;
  # A CMake CUDA_ARCHITECTURES value: -real for device code only, -virtual for PTX only.
  cmakeCudaArchitecturesString = flags.cmakeCudaArchitectures;
  isJetsonBuild = flags.isJetson;
  inherit dropDots;
  dropDot = dropDots;
  cudaComputeCapabilityToName = capabilities.archName;
}
