# Hydra's declarative jobsets (spec.json points here): one flake jobset per
# branch to watch. Each evaluates the flake's hydraJobs: the same jobs as the
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
in
{
  jobsets = pkgs.writeText "jobsets.json" (builtins.toJSON { main = flakeJobset "main"; });
}
