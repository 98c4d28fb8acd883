# The nixcuda overlays, one concern per file, each bringing what it builds on
# and usable on its own (`nixcuda.overlays.cuda-packages`, ...). `default`
# composes all of them but `driver-runpath`, an opt-in that rebuilds every
# CUDA package of nixpkgs.
let
  overlays = {
    options = import ./options.nix;
    hooks = import ./hooks.nix;
    driver-runpath = import ./driver-runpath.nix;
    cuda-packages = import ./cuda-packages.nix;
    python-packages = import ./python-packages.nix;
    tools = import ./tools.nix;
  };
in
overlays
// {
  default =
    final: prev:
    prev.lib.composeManyExtensions [
      overlays.cuda-packages
      overlays.python-packages
      overlays.tools
    ] final prev;
}
