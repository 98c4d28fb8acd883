# Hydra's declarative jobsets (spec.json points here), for each branch to
# watch: a flake jobset of the flake's hydraJobs (the same jobs as the GitHub
# workflow: the test suite, PyTorch, its closure gate, plus the GPU check,
# which Hydra schedules on builders with the "cuda" system feature), and
# beside it a jobset of the CUDA set's checks alone (docs/nix/checks.md).
{ nixpkgs, ... }:
let
  # Where this repository lives; spec.json's "src" input names the same.
  repository = "https://github.com/OWNER/nixcuda";
  pkgs = import nixpkgs { };
  common = {
    enabled = 1;
    hidden = false;
    schedulingshares = 100;
    enableemail = false;
    emailoverride = "";
    keepnr = 10;
  };
  gitInput = value: {
    type = "git";
    inherit value;
    emailresponsible = false;
  };
  flakeJobset =
    ref:
    common
    // {
      description = "nixcuda ${ref}";
      type = 1; # a flake jobset: Hydra evaluates the flake's hydraJobs
      flake = "git+${repository}?ref=${ref}";
      checkinterval = 600;
    };
  # hydraJobs.cuda-checks only: a legacy jobset, since a flake jobset
  # evaluates every job of hydraJobs. Its expression, ci/hydra/cuda-checks.nix,
  # evaluates the flake without flakes from the two inputs; nixpkgs follows
  # the branch flake.lock tracks. Once a day: it evaluates the whole set.
  cudaChecksJobset =
    ref:
    common
    // {
      description = "nixcuda ${ref}: closure checks of the CUDA set";
      type = 0;
      nixexprinput = "src";
      nixexprpath = "ci/hydra/cuda-checks.nix";
      checkinterval = 86400;
      inputs = {
        src = gitInput "${repository} ${ref}";
        nixpkgs = gitInput "https://github.com/NixOS/nixpkgs nixos-unstable";
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
