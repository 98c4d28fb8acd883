# The expression of the jobset cuda-checks-<branch> (jobsets.nix): the flake's
# hydraJobs.cuda-checks (docs/nix/checks.md), evaluated without flakes from
# the jobset's inputs, `src` (this repository) and `nixpkgs`, which stand for
# the flake's self and its nixpkgs input.
{ src, nixpkgs, ... }:
let
  flake = import (src + "/flake.nix");
  nixpkgsInput = {
    outPath = nixpkgs;
    inherit ((import nixpkgs { system = "x86_64-linux"; })) lib;
    legacyPackages = nixpkgsInput.lib.genAttrs [
      "x86_64-linux"
      "aarch64-linux"
    ] (system: import nixpkgs { inherit system; });
  };
  self = flake.outputs {
    inherit self;
    nixpkgs = nixpkgsInput;
  }
  // {
    outPath = src;
  };
in
self.hydraJobs.cuda-checks
