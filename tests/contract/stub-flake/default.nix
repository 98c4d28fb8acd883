# nixpkgs' default.nix, `import nixpkgs { ... }`, for the stub flake beside it.
import ./tests/contract/nixpkgs-contract-stub
