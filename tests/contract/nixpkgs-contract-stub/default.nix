# CONTRACT STUB, not nixpkgs.
#
# nixpkgs cannot be fetched where nixcuda's tests run, so the overlay and the
# flake are evaluated against this stand-in for the part of nixpkgs they use:
# `import <stub> { system; config; overlays; }` as for nixpkgs, the same
# attribute names, argument shapes and behaviours as nixpkgs at the revision
# pinned in flake.lock (the nixpkgs files each part follows are named where it
# is defined). Functions that make derivations return records and never build
# anything: a record has the derivation-like attributes (name, outputs,
# drvPath, outPath, passthru, meta, override, overrideAttrs), the arguments
# that reach the builder (buildInputs, ...), as a derivation has them, and `stubKind`
# and `stubArgs`, the arguments it was given, which the contract tests
# inspect. As in nixpkgs:
#
# - a record's drvPath and outPaths exist only when check-meta accepts it
#   (broken, unfree without allowUnfree or allowUnfreePredicate, unsupported
#   platform), and computing them forces every derivation among its
#   arguments: evaluating a package fails when any input fails;
# - name, meta and passthru can be read without that check.
#
# An attribute missing here means the overlay asked nixpkgs for something
# outside the contract; evaluation fails and names it.
{
  system ? builtins.currentSystem,
  config ? { },
  overlays ? [ ],
  # nixpkgs' default CUDA set; which one it is at the pinned revision is not
  # part of the contract, so tests try more than one.
  defaultCudaVersion ? "12.9",
  ...
}:
let
  lib = import ./select-lib.nix;

  # pkgs/top-level/config.nix: the defaults of the options read here.
  fullConfig = {
    allowUnfree = false;
    allowBroken = false;
    allowUnsupportedSystem = false;
    allowAliases = true;
    cudaSupport = false;
    rocmSupport = false;
    cudaCapabilities = [ ];
    cudaForwardCompat = true;
  }
  // config;

  checkMeta = import ./check-meta.nix { config = fullConfig; inherit system; };
  # A store path's hash part: 32 characters of Nix's base-32 alphabet, which
  # has no e (Nix rejects drvPaths with one; `nix flake check` reads them).
  stubHash = s: builtins.replaceStrings [ "e" ] [ "z" ] (builtins.substring 0 32 (builtins.hashString "sha256" s));

  # What reaches the builder: every argument but passthru, meta and functions.
  # Serialising it forces the outPath of each derivation among them.
  drvInputs =
    args:
    let
      keep = builtins.removeAttrs args [
        "passthru"
        "meta"
      ];
    in
    lib.filterAttrs (_: v: !(lib.isFunction v)) keep;

  # A derivation record: `attrsFn` gives its attributes from the final ones
  # (pkgs/stdenv/generic/make-derivation.nix: finalAttrs, finalPackage
  # included; overrideAttrs takes `prevAttrs: ...` or `finalAttrs:
  # prevAttrs: ...`). `extra` holds attributes that are not arguments.
  recordWith =
    kind: attrsFn: extra:
    let
      args = lib.fix (final: attrsFn (final // { finalPackage = all; }));
      name = args.name or "${args.pname}-${args.version}";
      outputs = args.outputs or [ "out" ];
      validity = checkMeta {
        inherit name;
        attrs = args;
      };
      meta = {
        outputsToInstall = [ (builtins.head outputs) ];
      }
      // args.meta or { }
      // {
        available = validity.valid;
      };
      checked = x: if validity.valid then x else throw validity.message;
      drvPath = checked "/nix/store/${stubHash "${kind}:${system}:${name}:${builtins.toJSON (drvInputs args)}"}-${name}.drv";
      outPathOf =
        o: "${builtins.substring 0 (builtins.stringLength drvPath - 4) drvPath}${if o == "out" then "" else "-${o}"}";
      # pkgs/stdenv/generic/make-derivation.nix: the derivation's attributes
      # (buildInputs, ...) are attributes of the result, as builtins.derivation
      # returns its arguments (values unforced: reading `name` of a package
      # whose src throws still works).
      base = builtins.removeAttrs args [ "passthru" "meta" ] // {
        type = "derivation";
        inherit
          name
          outputs
          system
          meta
          drvPath
          ;
        stubKind = kind;
        stubArgs = args;
        outPath = outPathOf (builtins.head outputs);
        outputName = builtins.head outputs;
        overrideAttrs =
          f:
          recordWith kind (
            final:
            let
              prev = attrsFn final;
              step = f prev;
            in
            prev // (if builtins.isFunction step then f final prev else step)
          ) extra;
      }
      // builtins.intersectAttrs {
        pname = null;
        version = null;
      } args
      // (args.passthru or { })
      // extra;
      all = base // builtins.listToAttrs (map (o: lib.nameValuePair o (outputFor o)) outputs);
      outputFor =
        o:
        all
        // {
          outputName = o;
          outPath = outPathOf o;
          outputSpecified = true;
        };
    in
    all;
  record = kind: args: recordWith kind (_: args);

  # pkgs/stdenv/generic/make-derivation.nix: attributes, or a function of the
  # final attributes.
  mkDerivationWith =
    kind: argsOrFun: recordWith kind (if builtins.isFunction argsOrFun then argsOrFun else _: argsOrFun) { };

  tool = name: record "tool" {
    inherit name;
    meta.mainProgram = name;
  } { };

  stdenv = {
    mkDerivation = mkDerivationWith "mkDerivation";
    hostPlatform = {
      inherit system;
      isLinux = true;
      isDarwin = false;
      isx86_64 = system == "x86_64-linux";
      isAarch64 = system == "aarch64-linux";
    };
    cc = record "cc-wrapper" {
      name = "gcc-wrapper-14.3.0";
      passthru.targetPrefix = "";
      passthru.cc = record "gcc" {
        name = "gcc-14.3.0";
        outputs = [
          "out"
          "lib"
        ];
      } { };
    } { };
  };

  base = self: {
    inherit lib system;
    config = fullConfig;
    inherit stdenv;
    # pkgs/top-level/stage.nix: the packages of the stage a build's outputs
    # run on; targetPackages.stdenv.cc is the C++ compiler torch's inductor records.
    targetPackages = self;
    callPackage = lib.callPackageWith self;
    newScope = extra: lib.callPackageWith (self // extra);
    # pkgs/build-support/trivial-builders/default.nix: `env` holds the
    # derivation's attributes (meta and passthru among them).
    runCommand =
      name: env: buildCommand:
      record "runCommand" (env // { inherit name buildCommand; }) { };
    # pkgs/build-support/trivial-builders/default.nix: writeText NAME TEXT,
    # a writeTextFile of one file.
    writeText = name: text: record "writeText" { inherit name text; } { };
    symlinkJoin = args: record "symlinkJoin" (args // { name = args.name or "${args.pname}-${args.version}"; }) { };
    # pkgs/build-support/mkshell/default.nix: a derivation named nix-shell
    # unless named; its inputs are `packages` and those of each of `inputsFrom`,
    # all of which evaluate with it.
    mkShell = args: record "mkShell" (args // { name = args.name or "nix-shell"; }) { };
    # pkgs/build-support/trivial-builders/default.nix: makeSetupHook is a
    # runCommand whose environment holds the substitutions, so each is an
    # attribute of the hook (addDriverRunpath.driverLink); substituteAll puts
    # them into the script.
    makeSetupHook =
      attrs: script: record "makeSetupHook" (attrs // { inherit script; }) (attrs.substitutions or { });
    # pkgs/by-name/ad/addDriverRunpath/package.nix: where NixOS links the
    # driver's libraries.
    addDriverRunpath = self.makeSetupHook {
      name = "add-driver-runpath-hook";
      substitutions.driverLink = "/run/opengl-driver" + lib.optionalString (system == "i686-linux") "-32";
    } "add-driver-runpath-hook.sh";
    fetchurl = args: record "fetchurl" (args // { name = args.name or (baseNameOf args.url); }) { };
    autoPatchelfHook = tool "autoPatchelfHook";
    # pkgs/by-name/au/autoAddDriverRunpath: nixpkgs' own driver-runpath hook.
    autoAddDriverRunpath = self.makeSetupHook { name = "auto-add-driver-runpath-hook"; } "auto-add-driver-runpath-hook.sh";
    zlib = tool "zlib";
    nix = tool "nix";
    patchelf = tool "patchelf";
    pax-utils = tool "pax-utils";
    # pkgs/by-name/ni/nixfmt-tree/package.nix: treefmt.withConfig, a
    # runCommand named nixfmt-tree (pkgs/by-name/tr/treefmt/modules/wrapper.nix)
    # whose program is treefmt.
    nixfmt-tree = self.runCommand "nixfmt-tree" {
      meta = {
        mainProgram = "treefmt";
        description = "Official Nix formatter zero-setup starter using treefmt";
      };
    } "makeWrapper treefmt $out/bin/treefmt";
    cmake = tool "cmake";
    ninja = tool "ninja";
    openssl = tool "openssl";
    mpi = tool "openmpi";
    # Python package sets are extended through pythonPackagesExtensions, as in nixpkgs.
    pythonPackagesExtensions = [ ];
    python3Packages = lib.fix (
      builtins.foldl' (acc: ext: lib.extends ext acc) (import ./python.nix { inherit lib record tool; pkgs = self; }) self.pythonPackagesExtensions
    );
    # pkgs/by-name/ma/magma/package.nix: dynamic magma with CUDA is broken.
    magma = self.callPackage ./magma.nix { };
    magma-cuda = self.magma.override {
      cudaSupport = true;
      rocmSupport = false;
    };
    magma-cuda-static = self.magma-cuda.override { static = true; };
    # pkgs/top-level/cuda-packages.nix: the sets of the manifests this project
    # also packages (NVIDIA's 12.9.1 and 13.0.2).
    cudaPackages_12_9 = cudaScope self "12.9" "12.9.1";
    cudaPackages_13_0 = cudaScope self "13.0" "13.0.2";
    cudaPackages = self."cudaPackages_${builtins.replaceStrings [ "." ] [ "_" ] defaultCudaVersion}";
    cudatoolkit = self.cudaPackages.cudatoolkit;
    # pkgs/build-support/closure-info.nix: a derivation with structured
    # attributes whose exportReferencesGraph.closure is the roots; its
    # builder writes total-nar-size, registration (for nix-store --load-db)
    # and store-paths from the graph Nix exports, with jq.
    closureInfo =
      { rootPaths }:
      record "closureInfo" {
        name = "closure-info";
        __structuredAttrs = true;
        exportReferencesGraph.closure = rootPaths;
        preferLocalBuild = true;
        nativeBuildInputs = [
          self.coreutils
          self.jq
        ];
        empty = rootPaths == [ ];
        buildCommand = "write total-nar-size, registration and store-paths from .closure of $NIX_ATTRS_JSON_FILE";
      } { };
    coreutils = tool "coreutils";
    jq = tool "jq";
    # pkgs/top-level/all-packages.nix: python3 is the interpreter whose
    # package set python3Packages is.
    python3 = self.python3Packages.python;
  };
  cudaScope =
    pkgs: version: release:
    import ./cuda.nix {
      inherit
        lib
        pkgs
        record
        version
        release
        ;
      config = fullConfig;
    };

  pkgs = lib.fix (builtins.foldl' (acc: overlay: lib.extends overlay acc) base overlays);
in
pkgs
