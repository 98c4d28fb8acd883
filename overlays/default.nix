# The nixcuda overlays, one concern per file. Each public overlay brings what
# it builds on, so it also works on its own (`nixcuda.overlays.cuda-packages`,
# ...); `default` composes all of them, each file applied once, but
# `driver-runpath`, an opt-in that rebuilds every CUDA package of nixpkgs.
let
  files = {
    options = import ./options.nix;
    hooks = import ./hooks.nix;
    driver-runpath = import ./driver-runpath.nix;
    cuda-packages = import ./cuda-packages.nix;
    python-packages = import ./python-packages.nix;
    tools = import ./tools.nix;
  };
  # What each file builds on, in the order they apply.
  basis = {
    options = [ ];
    hooks = [ ];
    tools = [ ];
    driver-runpath = [ "hooks" ];
    cuda-packages = [
      "options"
      "hooks"
    ];
    python-packages = [
      "options"
      "hooks"
      "cuda-packages"
      "tools"
    ];
  };
  compose =
    names: final: prev:
    prev.lib.composeManyExtensions (map (name: files.${name}) names) final prev;
in
builtins.mapAttrs (name: deps: compose (deps ++ [ name ])) basis
// {
  default = compose [
    "options"
    "hooks"
    "cuda-packages"
    "tools"
    "python-packages"
  ];
}
