# CONTRACT STUB, not nixpkgs: nixpkgs' flake.nix (its `lib` and
# `legacyPackages.${system}`, which is `import ./. { inherit system; }`) over
# the contract stub, so Nix can evaluate nixcuda's flake itself with
# `--override-input nixpkgs`. The stub reads files of this repository (NVIDIA's
# manifests), so this flake's source is a copy of the repository with this
# file and ./default.nix at its root (tests/nix/test_overlay_contract.py lays it out).
# nixpkgs exposes lib.systems.flakeExposed; the stub, the systems nixcuda
# builds for.
{
  description = "nixpkgs contract stub";

  outputs =
    { self }:
    let
      lib = import ./tests/contract/nixpkgs-contract-stub/lib.nix;
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs lib.platforms.linux (system: import ./. { inherit system; });
    };
}
