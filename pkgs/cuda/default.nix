# A CUDA package set from NVIDIA's manifests: one derivation per
# redistributable of the release, plus cuDNN for the matching CUDA variant.
# The releases are listed once, in ./releases.json.
#
#   cuda = callPackage ./pkgs/cuda { cudaMajorMinorVersion = "13.0"; }
#   cuda.members finalSet   # every redistributable, built against finalSet
#   cuda.listed             # the names with an output list for this platform
#
# `members` is a function of the final set (members depend on members of the
# same set only), so it can be the whole set (lib.fix) or an extension of
# nixpkgs' own CUDA scope (overlays/cuda-packages.nix).
{
  lib,
  stdenv,
  callPackage,
  nixcuda,
  cudaMajorMinorVersion,
}:
let
  inherit (nixcuda.lib.cuda) releases;
  release =
    releases.${cudaMajorMinorVersion}
      or (throw "nixcuda: no CUDA package set for ${cudaMajorMinorVersion}; there are ${builtins.concatStringsSep ", " (builtins.attrNames releases)}");
  cudaMajor = lib.versions.major cudaMajorMinorVersion;
  readJSON = path: builtins.fromJSON (builtins.readFile path);

  flags = nixcuda.flagsFor cudaMajorMinorVersion;
  # Nix system -> NVIDIA platform. Jetson builds (aarch64 with Jetson
  # capabilities, CUDA 12) use NVIDIA's linux-aarch64 archives, other aarch64
  # machines linux-sbsa.
  redistSystems = {
    x86_64-linux = "linux-x86_64";
    aarch64-linux = if flags.isJetson && cudaMajor == "12" then "linux-aarch64" else "linux-sbsa";
  };
  redistSystem = redistSystems.${stdenv.hostPlatform.system} or "unsupported";

  licenses = nixcuda.lib.cuda.licenses;

  products = [
    {
      manifest = readJSON (./manifests + "/redistrib_${release.cuda}.json");
      outputs = readJSON (./outputs + "/${release.cuda}.json");
      baseUrl = "https://developer.download.nvidia.com/compute/cuda/redist";
      variant = null;
      license = licenses.cuda;
    }
    {
      manifest = readJSON (./manifests + "/redistrib_${release.cudnn}.json");
      outputs = readJSON (./outputs + "/cudnn-${release.cudnn}-cuda${cudaMajor}.json");
      baseUrl = "https://developer.download.nvidia.com/compute/cudnn/redist";
      variant = "cuda${cudaMajor}";
      license = licenses.cudnn;
    }
  ];

  entriesOf = product: lib.filterAttrs (_: e: builtins.isAttrs e && e ? version) product.manifest;
  archiveOf =
    product: entry: platform:
    let
      a = entry.${platform} or null;
    in
    if a == null || product.variant == null then a else a.${product.variant} or null;
  outputListOf = product: name: product.outputs.packages.${name}.${redistSystem} or null;

  packagesOf =
    product: set:
    let
      fixups = import ./fixups.nix {
        inherit lib;
        cudaPackages = set;
      };
    in
    builtins.mapAttrs (
      name: entry:
      let
        inspected = outputListOf product name;
        plain = callPackage ./redist.nix {
          inherit cudaMajorMinorVersion name;
          inherit (product) baseUrl license;
          inherit (entry) version;
          description = entry.name or name;
          archive = archiveOf product entry redistSystem;
          outputs = if inspected == null then null else inspected.outputs;
          strict = inspected != null && lib.hasPrefix "tarball" inspected.inspected;
          # The Nix systems whose NVIDIA platform (as chosen above) has an archive.
          platforms = builtins.filter (s: archiveOf product entry redistSystems.${s} != null) (
            builtins.attrNames redistSystems
          );
          # nixpkgs' marker hook, where the set has it (extending nixpkgs' scope).
          markForCudatoolkitRootHook = set.markForCudatoolkitRootHook or null;
        };
      in
      if fixups ? ${name} then plain.overrideAttrs fixups.${name} else plain
    ) (entriesOf product);
in
{
  # Every redistributable of the release, as a function of the final set.
  members = set: builtins.foldl' (acc: product: acc // packagesOf product set) { } products;

  # The redistributables that have an output list for this platform: the only
  # ones that may replace a member of nixpkgs' scope. Computed without the
  # set, as a scope extension's names must be.
  listed = builtins.concatMap (
    product:
    builtins.filter (name: outputListOf product name != null) (builtins.attrNames (entriesOf product))
  ) products;

  # What the set says of itself, beside nixpkgs' own attributes.
  about = {
    cudaMajorMinorPatchVersion = release.cuda;
    cudnnVersion = release.cudnn;
    inherit redistSystem;
  };

  # One record for every derived target field: this project's names and
  # nixpkgs' (formatCapabilities), from the same capabilities.
  flags = nixcuda.lib.cuda.scopeFlags flags;
}
