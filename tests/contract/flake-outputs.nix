# flake.nix's outputs, evaluated with the nixpkgs contract stub as the
# nixpkgs input (and nothing fetched).
let
  flake = import ../../flake.nix;
  stubPath = ./nixpkgs-contract-stub;
  nixpkgs = {
    outPath = stubPath;
    lib = import (stubPath + "/lib.nix");
    legacyPackages = nixpkgs.lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] (
      system: import stubPath { inherit system; }
    );
  };
  self = flake.outputs { inherit self nixpkgs; } // { outPath = ../..; };
in
self
