# CUDA capabilities, the options built on them, and NVIDIA's licenses.
let
  capabilities = import ./capabilities.nix;
  options = import ./options.nix { inherit capabilities; };
  flags = import ./flags.nix { inherit capabilities options; };
  licenses = import ./licenses.nix;
in
{
  inherit (capabilities) table parse supportedBy supportedCapabilities;
  inherit (options) validate defaultCapabilities resolve;
  inherit flags;
  inherit (licenses) licenses isCudaLicense allowUnfreePredicate;
  # The CUDA releases this project packages (see pkgs/cuda).
  cudaVersions = [ "12.9" "13.0" ];
}
