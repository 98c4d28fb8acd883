# Hydra's declarative jobsets (spec.json points here): one flake jobset per
# branch to watch, and beside it one of the CUDA set's checks. Each evaluates the flake's hydraJobs: the same jobs as the
# GitHub workflow (the test suite, PyTorch, its closure gate) plus the GPU
# check, which Hydra schedules on builders with the "cuda" system feature.
{ nixpkgs, ... }:
let
  # Where this repository lives; spec.json's "src" input names the same.
  repository = "https://github.com/OWNER/nixcuda";
  pkgs = import nixpkgs { };
  flakeJobset = ref: {
    enabled = 1;
    hidden = false;
    description = "nixcuda ${ref}";
    type = 1; # a flake jobset: Hydra evaluates the flake's hydraJobs
    flake = "git+${repository}?ref=${ref}";
    checkinterval = 600;
    schedulingshares = 100;
    enableemail = false;
    emailoverride = "";
    keepnr = 10;
  };
  # The CUDA set's checks alone (hydraJobs.cuda-checks, docs/nix/checks.md):
  # a legacy jobset, since a flake jobset evaluates every job of hydraJobs.
  # Its expression, ci/hydra/cuda-checks.nix, evaluates the flake without
  # flakes from the two inputs; nixpkgs follows the branch flake.lock tracks.
  cudaChecksJobset = ref: {
    enabled = 1;
    hidden = false;
    description = "nixcuda ${ref}: closure checks of the CUDA set";
    type = 0;
    nixexprinput = "src";
    nixexprpath = "ci/hydra/cuda-checks.nix";
    checkinterval = 86400;
    schedulingshares = 100;
    enableemail = false;
    emailoverride = "";
    keepnr = 10;
    inputs = {
      src = {
        type = "git";
        value = "${repository} ${ref}";
        emailresponsible = false;
      };
      nixpkgs = {
        type = "git";
        value = "https://github.com/NixOS/nixpkgs nixos-unstable";
        emailresponsible = false;
      };
    };
  };
in
{
  jobsets = pkgs.writeText "jobsets.json" (
    builtins.toJSON {
      main = flakeJobset "main";
      cuda-checks-main = cudaChecksJobset "main";
    }
  );
}
