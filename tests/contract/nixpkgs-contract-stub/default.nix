# CONTRACT STUB, not nixpkgs.
#
# nixpkgs cannot be fetched where nixcuda's tests run, so the overlay and the
# flake are evaluated against this stand-in for exactly the part of nixpkgs
# they use: `import <stub> { system; config; overlays; }` as for nixpkgs, the
# same attribute names and argument shapes as nixpkgs at the revision pinned
# in flake.lock. Functions that make derivations return records, never build
# anything: a record has the derivation-like attributes (name, outputs,
# outPath, passthru, meta) and `stubKind` and `stubArgs`, the arguments it was
# given, which the contract tests inspect. Every package set member is a
# record of the same kind. An attribute missing here means the overlay asked
# nixpkgs for something outside the contract; evaluation fails and names it.
{
  system ? builtins.currentSystem,
  config ? { },
  overlays ? [ ],
  ...
}:
let
  lib = import ./lib.nix;

  # nixpkgs' config defaults for the options nixcuda reads (pkgs/top-level/config.nix).
  fullConfig = {
    allowUnfree = false;
    cudaSupport = false;
    cudaCapabilities = [ ];
    cudaForwardCompat = true;
  }
  // config;

  fakeHash = s: builtins.substring 0 32 (builtins.hashString "sha256" s);

  # A derivation record. `extra` holds attributes that are not arguments.
  record =
    kind: args: extra:
    let
      name = args.name or "${args.pname}-${args.version}";
      outputs = args.outputs or [ "out" ];
      hash = fakeHash "${kind}:${name}:${builtins.toJSON (builtins.attrNames args)}";
      base = {
        type = "derivation";
        inherit name outputs system;
        stubKind = kind;
        stubArgs = args;
        meta = args.meta or { };
        drvPath = "/nix/store/${hash}-${name}.drv";
        outPath = "/nix/store/${hash}-${name}";
        outputName = builtins.head outputs;
        overrideAttrs =
          f:
          let
            next = if builtins.isFunction (f args) then f args args else f args;
          in
          record kind (args // next) extra;
      }
      // builtins.intersectAttrs {
        pname = null;
        version = null;
      } args
      // (args.passthru or { })
      // extra;
      withOutputs = base // builtins.listToAttrs (map (o: { name = o; value = outputFor o; }) outputs);
      outputFor =
        o:
        withOutputs
        // {
          outputName = o;
          outPath = if o == "out" then base.outPath else "${base.outPath}-${o}";
        };
    in
    withOutputs;

  # stdenv.mkDerivation accepts attributes or a function of the final attributes.
  mkDerivationWith =
    kind: argsOrFun:
    if builtins.isFunction argsOrFun then
      let
        final = lib.fix (self: argsOrFun (self // { finalPackage = record kind self { }; }));
      in
      record kind final { }
    else
      record kind argsOrFun { };

  # callPackage: fills a function's arguments from the package set, and makes
  # the result overridable with `.override`, as nixpkgs does.
  callPackageWith =
    scope: fn: args:
    let
      f = if builtins.isFunction fn then fn else import fn;
      auto = builtins.intersectAttrs (builtins.functionArgs f) scope;
      call = overrides: (f (auto // args // overrides)) // { override = more: call (overrides // more); };
    in
    call { };

  tool = name: record "tool" { inherit name; meta.mainProgram = name; } { };

  pythonPackages =
    pkgs: self:
    let
      buildPython =
        kind: args:
        record kind args {
          overridePythonAttrs =
            f: buildPython kind (args // (if builtins.isFunction f then f args else f));
        };
    in
    {
      buildPythonApplication = buildPython "buildPythonApplication";
      buildPythonPackage = buildPython "buildPythonPackage";
      setuptools = tool "setuptools";
      pyelftools = tool "pyelftools";
      networkx = tool "networkx";
      rich = tool "rich";
      cryptography = tool "cryptography";
      zstandard = tool "zstandard";
      pytestCheckHook = tool "pytestCheckHook";
      hypothesis = tool "hypothesis";
      jsonschema = tool "jsonschema";
      python = tool "python3" // {
        sitePackages = "lib/python3.13/site-packages";
        withPackages = f: record "python-env" {
          name = "python3-env";
          packages = f self;
        } { };
      };
      callPackage = callPackageWith (pkgs // self);
      torch = self.callPackage ./torch.nix { };
    };

  stdenv = {
    mkDerivation = mkDerivationWith "mkDerivation";
    hostPlatform = {
      inherit system;
      isLinux = true;
      isx86_64 = system == "x86_64-linux";
      isAarch64 = system == "aarch64-linux";
    };
    cc = record "cc-wrapper" {
      name = "gcc-wrapper";
      passthru.cc = record "gcc" {
        name = "gcc";
        outputs = [ "out" "lib" ];
      } { };
    } { };
  };

  base = self: {
    inherit lib system;
    config = fullConfig;
    inherit stdenv;
    callPackage = callPackageWith self;
    runCommand =
      name: env: buildCommand:
      record "runCommand" (env // { inherit name buildCommand; }) { };
    mkShell = args: record "mkShell" (args // { name = args.name or "nix-shell"; }) { };
    makeSetupHook = attrs: script: record "makeSetupHook" (attrs // { inherit script; }) { };
    fetchurl = args: record "fetchurl" (args // { name = args.name or (baseNameOf args.url); }) { };
    autoPatchelfHook = tool "autoPatchelfHook";
    # nixpkgs' own driver-runpath hook, which nixcuda's overlay replaces.
    autoAddDriverRunpath = record "makeSetupHook" { name = "auto-add-driver-runpath-hook"; } { };
    zlib = tool "zlib";
    nix = tool "nix";
    patchelf = tool "patchelf";
    pax-utils = tool "pax-utils";
    nixfmt-tree = tool "treefmt";
    # Python package sets are extended through pythonPackagesExtensions, as in nixpkgs.
    pythonPackagesExtensions = [ ];
    python3Packages = lib.fix (builtins.foldl' (acc: ext: lib.extends ext acc) (pythonPackages self) self.pythonPackagesExtensions);
    cmake = tool "cmake";
    ninja = tool "ninja";
    magma = record "mkDerivation" { pname = "magma"; version = "2.9.0"; outputs = [ "out" "dev" ]; } { };
    magma-cuda-static = record "mkDerivation" { pname = "magma-cuda-static"; version = "2.9.0"; } { };
    cudaPackages_12_9 = cudaScope "12.9";
    cudaPackages_13_0 = cudaScope "13.0";
    cudaPackages = self.cudaPackages_12_9;
    cudatoolkit = self.cudaPackages.cudatoolkit;
    # nixpkgs' closureInfo: a directory with registration and store-paths.
    closureInfo = { rootPaths }: record "closureInfo" { name = "closure-info"; inherit rootPaths; } { };
  };
  cudaScope = import ./cuda.nix {
    inherit lib record;
    config = fullConfig;
    inherit stdenv;
  };

  pkgs = lib.fix (builtins.foldl' (acc: overlay: lib.extends overlay acc) base overlays);
in
pkgs
