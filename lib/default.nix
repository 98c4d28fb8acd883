# The nixcuda Nix library. Only builtins: it evaluates with plain
# nix-instantiate, with or without nixpkgs.
#
#   (import ./lib).cuda.flags { capabilities = [ "8.6" ]; forwardCompat = true; cudaVersion = "13.0"; }
{
  cuda = import ./cuda;
}
