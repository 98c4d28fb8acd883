# A CUDA package set from NVIDIA's manifests: one derivation per
# redistributable of the release, plus cuDNN for the matching CUDA variant.
#
#   (callPackage ./pkgs/cuda { cudaMajorMinorVersion = "13.0"; }).members
#
# is a function of the final set (members depend on members of the same set
# only), so it can be the whole set (lib.fix) or an extension of nixpkgs' own
# CUDA scope (overlays/cuda-packages.nix).
{
  lib,
  stdenv,
  callPackage,
  nixcuda,
  cudaMajorMinorVersion,
}:
let
  releases = {
    "12.9" = {
      cuda = "12.9.1";
      cudnn = "9.27.0";
    };
    "13.0" = {
      cuda = "13.0.2";
      cudnn = "9.27.0";
    };
  };
  release =
    releases.${cudaMajorMinorVersion}
      or (throw "nixcuda: no CUDA package set for ${cudaMajorMinorVersion}; there are ${builtins.concatStringsSep ", " (builtins.attrNames releases)}");
  cudaMajor = builtins.head (builtins.split "\\." cudaMajorMinorVersion);
  readJSON = path: builtins.fromJSON (builtins.readFile path);

  cudaManifest = readJSON (./manifests + "/redistrib_${release.cuda}.json");
  cudaOutputs = readJSON (./outputs + "/${release.cuda}.json");
  cudnnManifest = readJSON (./manifests + "/redistrib_${release.cudnn}.json");
  cudnnOutputs = readJSON (./outputs + "/cudnn-${release.cudnn}-cuda${cudaMajor}.json");

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

  packagesOf =
    {
      manifest,
      outputs,
      baseUrl,
      variant ? null,
      license,
    }:
    self:
    let
      fixups = import ./fixups.nix self;
      entries = lib.filterAttrs (_: e: builtins.isAttrs e && e ? version) manifest;
      archiveOf =
        entry: platform:
        let
          a = entry.${platform} or null;
        in
        if a == null || variant == null then a else a.${variant} or null;
    in
    builtins.mapAttrs (
      name: entry:
      let
        archive = archiveOf entry redistSystem;
        inspected = outputs.packages.${name}.${redistSystem} or null;
        fixup = fixups.${name} or { };
      in
      callPackage ./redist.nix {
        inherit cudaMajorMinorVersion name baseUrl license;
        inherit (entry) version;
        description = entry.name or name;
        inherit archive;
        outputs = if inspected == null then null else inspected.outputs;
        strict = inspected != null && lib.hasPrefix "tarball" inspected.inspected;
        # The Nix systems whose NVIDIA platform (as chosen above) has an archive.
        platforms = builtins.filter (s: archiveOf entry redistSystems.${s} != null) (builtins.attrNames redistSystems);
        deps = fixup.deps or [ ];
        allowFHSReferences = fixup.allowFHSReferences or false;
      }
    ) entries;

  members =
    self:
    packagesOf {
      manifest = cudaManifest;
      outputs = cudaOutputs;
      baseUrl = "https://developer.download.nvidia.com/compute/cuda/redist";
      license = licenses.cuda;
    } self
    // packagesOf {
      manifest = cudnnManifest;
      outputs = cudnnOutputs;
      baseUrl = "https://developer.download.nvidia.com/compute/cudnn/redist";
      variant = "cuda${cudaMajor}";
      license = licenses.cudnn;
    } self
    // {
      inherit cudaMajorMinorVersion flags redistSystem;
      cudaVersion = release.cuda;
      cudnnVersion = release.cudnn;
    };
in
{
  inherit members;
}
