# The nixcuda overlays. `default` composes all of them; each can also be used
# on its own (`nixcuda.overlays.options`, ...), one concern per file.
let
  overlays = {
    options = import ./options.nix;
    tools = import ./tools.nix;
  };
in
overlays
// {
  default =
    final: prev:
    prev.lib.composeManyExtensions [
      overlays.options
      overlays.tools
    ] final prev;
}
