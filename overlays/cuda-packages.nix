# CUDA package sets from NVIDIA's redistributables, split into outputs: one
# cudaPackages_<major>_<minor> per release of pkgs/cuda/releases.json. Builds on
# the options and hooks overlays (overlays/default.nix applies them
# first).
#
# Where nixpkgs has a CUDA scope of the same release, the set extends it
# (overrideScope) and replaces only the members this project has an output
# list for: every nixpkgs package built in the scope (NCCL, magma, ...) links
# against them, while the compiler (cuda_nvcc with the parts it runs, cuda_crt
# and libnvvm), its setup hooks, backendStdenv, cudatoolkit and every member
# without an output list stay nixpkgs'. `flags` is replaced as a whole, so
# every target field comes from the same capabilities. nixpkgs' default
# `cudaPackages` is left as it is. Elsewhere the set stands alone.
final: prev:
let
  inherit (prev) lib;
  toolchain = [
    "cuda_nvcc"
    "cuda_crt"
    "libnvvm"
  ];
  mkSet =
    version: base:
    let
      cuda = final.callPackage ../pkgs/cuda { cudaMajorMinorVersion = version; };
      replaced = builtins.filter (n: !builtins.elem n toolchain) cuda.listed;
    in
    if base != null && base ? overrideScope then
      base.overrideScope (
        cfinal: _:
        let
          ours = cuda.members cfinal;
        in
        lib.genAttrs replaced (n: ours.${n})
        // {
          inherit (cuda) flags;
          nixcudaRelease = cuda.about;
        }
      )
    else
      lib.fix (
        self:
        cuda.members self
        // {
          inherit (cuda) flags;
          nixcudaRelease = cuda.about;
          cudaMajorMinorVersion = version;
          cudaMajorVersion = lib.versions.major version;
          inherit (cuda.about) cudaMajorMinorPatchVersion;
          cudaAtLeast = lib.versionAtLeast version;
          cudaOlder = lib.versionOlder version;
        }
      );
  setName = version: "cudaPackages_" + builtins.replaceStrings [ "." ] [ "_" ] version;
in
# The names come from the data file, never from `final`: an overlay's
# attribute names must not depend on the fixed point.
builtins.listToAttrs (
  map (version: {
    name = setName version;
    value = mkSet version (prev.${setName version} or null);
  }) (import ../lib).cuda.cudaVersions
)
