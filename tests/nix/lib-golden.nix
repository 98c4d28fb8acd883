# Evaluates every case of tests/golden/cuda-flags.json with plain Nix and
# returns the names of the cases that fail (an empty list when all pass).
# Used by the flake's checks; tests/nix/test_nix_library.py runs the same cases
# through nix-instantiate and also checks the error messages as printed.
{
  lib ? import ../../lib,
}:
let
  golden = builtins.fromJSON (builtins.readFile ../golden/cuda-flags.json);
  fails = expr: !(builtins.tryEval (builtins.deepSeq expr true)).success;
  flags = builtins.filter (c: lib.cuda.flags c.args != c.expected) golden.flags;
  errors = builtins.filter (c: !fails (lib.cuda.flags c.args) || lib.cuda.validate c.args != c.messages) (
    golden.errors
  );
  defaults = builtins.filter (v: lib.cuda.defaultCapabilities v != golden.defaults.${v}) (
    builtins.attrNames golden.defaults
  );
in
map (c: "flags: ${c.name}") flags ++ map (c: "errors: ${c.name}") errors ++ map (v: "defaults: ${v}") defaults
