{
  description = "nixcuda: CUDA software on Nix, with closures you can audit";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = nixpkgs.lib.genAttrs systems;

      # nixpkgs with the overlay and CUDA on. Unfree software is allowed only
      # when its licenses are NVIDIA's CUDA licenses: a predicate, never
      # allowUnfree = true.
      # A nested set of derivations as one level: "PREFIX.a.b" = set.a.b.
      flatChecks =
        prefix: set:
        builtins.foldl' (
          acc: name:
          let
            v = set.${name};
            key = "${prefix}.${name}";
          in
          acc // (if (v.type or null) == "derivation" then { ${key} = v; } else flatChecks key v)
        ) { } (builtins.attrNames set);

      pkgsFor =
        system:
        import nixpkgs {
          inherit system;
          overlays = [ self.overlays.default ];
          config = {
            cudaSupport = true;
            allowUnfreePredicate = self.lib.cuda.allowUnfreePredicate;
          };
        };
    in
    {
      lib = import ./lib;

      overlays = import ./overlays;

      legacyPackages = forAllSystems pkgsFor;

      packages = forAllSystems (system: {
        inherit (self.legacyPackages.${system}) closure-audit;
        default = self.legacyPackages.${system}.closure-audit;
      });

      apps = forAllSystems (
        system:
        let
          app = {
            type = "app";
            program = nixpkgs.lib.getExe self.packages.${system}.closure-audit;
            meta.description = "closure-audit: audit ELF trees and Nix closures";
          };
        in
        {
          closure-audit = app;
          default = app;
        }
      );

      checks = forAllSystems (
        system:
        let
          pkgs = self.legacyPackages.${system};
        in
        {
          # The Nix library's golden cases, evaluated while the check is
          # instantiated; the build fails listing any case that does not pass.
          lib = pkgs.runCommand "nixcuda-lib-tests" {
            failures = import ./tests/nix/lib-golden.nix { inherit (self) lib; };
          } ''
            if [ -n "$failures" ]; then
              echo "failing cases: $failures" >&2
              exit 1
            fi
            touch $out
          '';
          # The Python test suite runs in closure-audit's checkPhase.
          closure-audit = self.packages.${system}.closure-audit;
          # PyTorch's runtime closure against ci/closure-budgets.toml: no
          # toolkit, magma, compiler; under the size budget.
          torch-closure = pkgs.python3Packages.torch.tests.closure;
          # PyTorch's own GPU code: exactly the requested capabilities.
          torch-archs = pkgs.python3Packages.torch.tests.archs;
        }
        # The CUDA set's checks (docs/nix/checks.md), flat as `nix flake
        # check` wants them: cuda-checks.<attribute path>, and the index.
        // flatChecks "cuda-checks" pkgs.cudaClosureChecks
      );

      # Hydra (ci/hydra): the checks, PyTorch itself, its GPU check, which
      # only builders with the "cuda" system feature take, and the CUDA set's
      # checks.
      hydraJobs = {
        inherit (self) checks;
        torch = forAllSystems (system: self.legacyPackages.${system}.python3Packages.torch);
        torch-gpu = forAllSystems (system: self.legacyPackages.${system}.python3Packages.torch.gpuCheck);
        # The CUDA set's checks, by attribute path, and their index: the
        # jobset `cuda-checks` of ci/hydra evaluates only these.
        cuda-checks = forAllSystems (system: self.legacyPackages.${system}.cudaClosureChecks);
      };

      formatter = forAllSystems (system: nixpkgs.legacyPackages.${system}.nixfmt-tree);

      devShells = forAllSystems (
        system:
        let
          pkgs = self.legacyPackages.${system};
        in
        {
          default = pkgs.mkShell {
            inputsFrom = [ self.packages.${system}.closure-audit ];
            packages = [
              pkgs.nix
              pkgs.patchelf
              pkgs.pax-utils
            ];
          };
        }
      );
    };
}
