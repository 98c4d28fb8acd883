# CONTRACT STUB, not nixpkgs: the Python package set
# (pkgs/top-level/python-packages.nix) as far as the overlay uses it: its
# callPackage sees the set and then the top level, buildPythonPackage's
# overridePythonAttrs (which, as in nixpkgs, does not keep callPackage's
# `override`), torch, triton with triton-cuda, and the aliases torchWithCuda
# and torchWithoutCuda (`torch.override { ... cudaSupport = ...; }`).
{
  lib,
  record,
  tool,
  pkgs,
}:
self:
let
  # pkgs/development/interpreters/python/python-packages-base.nix: a package's
  # name carries the interpreter's prefix (python3.13-), an application's has
  # none. mk-python-derivation.nix: a derivation that sets neither `pyproject`
  # nor `format` does not evaluate (its name and meta still read).
  buildPython =
    kind: namePrefix: args:
    let
      name = namePrefix + (args.name or "${args.pname}-${args.version}");
      format = lib.optionalAttrs (!(args ? pyproject || args ? format)) {
        format = throw "${name} does not configure a `format`. To build with setuptools as before, set `pyproject = true` and `build-system = [ setuptools ]`.";
      };
    in
    record kind (args // { inherit name; } // format) {
      overridePythonAttrs = f: buildPython kind namePrefix (args // (if builtins.isFunction f then f args else f));
    };
in
{
  buildPythonApplication = buildPython "buildPythonApplication" "";
  buildPythonPackage = buildPython "buildPythonPackage" "${self.python.libPrefix}-";
  setuptools = tool "setuptools";
  pyelftools = tool "pyelftools";
  networkx = tool "networkx";
  numpy = tool "numpy";
  igraph = tool "igraph";
  orjson = tool "orjson";
  rich = tool "rich";
  cryptography = tool "cryptography";
  zstandard = tool "zstandard";
  lz4 = tool "lz4";
  pytestCheckHook = tool "pytestCheckHook";
  hypothesis = tool "hypothesis";
  jsonschema = tool "jsonschema";
  filelock = tool "filelock";
  python = tool "python3" // {
    libPrefix = "python3.13";
    sitePackages = "lib/python3.13/site-packages";
    withPackages =
      f:
      record "python-env" {
        name = "python3-env";
        packages = f self;
      } { };
  };
  callPackage = lib.callPackageWith (pkgs // self);
  torch = self.callPackage ./torch.nix { };
  triton = self.callPackage ./triton.nix { };
  triton-cuda = self.triton.override { cudaSupport = true; };
  triton-no-cuda = self.triton.override { cudaSupport = false; };
  # python-packages.nix as stored at 0000a5db (2024): the index holds no
  # version from the pinned revision's months; torch 2.9.1 still takes each
  # argument these pass.
  torchWithCuda = self.torch.override {
    triton = self.triton-cuda;
    cudaSupport = true;
    rocmSupport = false;
  };
  torchWithoutCuda = self.torch.override { cudaSupport = false; };
}
