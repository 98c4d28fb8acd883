# CUDA capabilities, the options built on them, and NVIDIA's licenses.
let
  capabilities = import ./capabilities.nix;
  options = import ./options.nix { inherit capabilities; };
  flags = import ./flags.nix { inherit capabilities options; };
  licenses = import ./licenses.nix;
  scopeFlags = import ./scope-flags.nix { inherit capabilities; };
  # The CUDA package sets this project makes: listed once, in pkgs/cuda/releases.json.
  releasesData = builtins.fromJSON (builtins.readFile ../../pkgs/cuda/releases.json);
  # NVIDIA's CUDA libraries: the one table closure-audit reads too.
  librariesData = builtins.fromJSON (builtins.readFile ../data/cuda-libraries.json);
in
{
  inherit (capabilities) table parse supportedBy supportedCapabilities;
  inherit (options) validate defaultCapabilities resolve;
  inherit flags scopeFlags;
  inherit (licenses) licenses isCudaLicense allowUnfreePredicate;
  # CUDA major.minor -> { cuda; cudnn; }: the NVIDIA releases of each set.
  releases = releasesData.sets;
  cudaVersions = builtins.attrNames releasesData.sets;
  # The set PyTorch is built with.
  torchCudaVersion = releasesData.torch;
  # [ { file; family; redist; wheel; release_numbered; optional; } ]: a row a
  # library file (lib/data/cuda-libraries.json).
  libraries = librariesData.libraries;
  # family -> the cudaPackages attribute (redistributable) that ships it.
  redistOf = builtins.listToAttrs (map (l: { name = l.family; value = l.redist; }) librariesData.libraries);
}
