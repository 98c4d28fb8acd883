# The nixcuda overlays. `default` composes all of them; each can also be used
# on its own (`nixcuda.overlays.cuda-packages`, ...), one concern per file,
# each bringing what it builds on.
let
  overlays = {
    options = import ./options.nix;
    hooks = import ./hooks.nix;
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
