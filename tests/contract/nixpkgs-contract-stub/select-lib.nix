# The lib the stub and the overlay run on: nixpkgs' real lib/ when NIXPKGS_LIB
# names it (nix-community/nixpkgs.lib, or a nixpkgs checkout: the directory
# holding lib/ or lib/ itself), else the stub's ./lib.nix.
let
  given = builtins.getEnv "NIXPKGS_LIB";
in
if given == "" then
  import ./lib.nix
else if builtins.pathExists (given + "/lib/default.nix") then
  import (given + "/lib")
else
  import given
