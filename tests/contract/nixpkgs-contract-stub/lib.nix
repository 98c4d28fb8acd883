# CONTRACT STUB, not nixpkgs: the subset of nixpkgs' `lib` that nixcuda's
# overlay, its flake and this stub call, with the same names, argument shapes
# and semantics as nixpkgs' lib/ at the revision pinned in flake.lock. Anything
# else is missing on purpose: an evaluation that needs more fails, naming the
# attribute. With NIXPKGS_LIB set (./select-lib.nix) nixpkgs' real lib/ is
# used instead, and tests/nix/test_overlay_contract.py checks that both agree.
let
  inherit (builtins)
    attrNames
    concatStringsSep
    elem
    filter
    foldl'
    functionArgs
    isAttrs
    isFunction
    isList
    ;

  # lib/fixed-points.nix
  fix =
    f:
    let
      x = f x;
    in
    x;
  extends =
    overlay: f: final:
    let
      prev = f final;
    in
    prev // overlay final prev;
  composeExtensions =
    f: g: final: prev:
    let
      fApplied = f final prev;
      prev' = prev // fApplied;
    in
    fApplied // g final prev';

  # lib/trivial.nix
  setFunctionArgs = f: args: {
    __functor = self: f;
    __functionArgs = args;
  };
  functionArgs' = f: if f ? __functor then f.__functionArgs or (functionArgs' (f.__functor f)) else functionArgs f;
  mirrorFunctionArgs = f: g: setFunctionArgs g (functionArgs' f);
  isFunction' = f: isFunction f || (f ? __functor && isFunction (f.__functor f));
  warn = msg: builtins.trace "evaluation warning: ${msg}";

  # lib/customisation.nix: `override` re-calls the function with changed
  # arguments (and keeps working after overrideAttrs).
  makeOverridable =
    f:
    let
      mirrorArgs = mirrorFunctionArgs f;
    in
    mirrorArgs (
      origArgs:
      let
        result = f origArgs;
        overrideWith = newArgs: origArgs // (if isFunction' newArgs then newArgs origArgs else newArgs);
        overrideArgs = mirrorArgs (newArgs: makeOverridable f (overrideWith newArgs));
        overrideResult = g: makeOverridable (mirrorArgs (args: g (f args))) origArgs;
      in
      if isAttrs result then
        result
        // {
          override = overrideArgs;
          ${if result ? overrideAttrs then "overrideAttrs" else null} =
            fdrv: overrideResult (x: x.overrideAttrs fdrv);
        }
      else
        result
    );
  callPackageWith =
    autoArgs: fn: args:
    let
      f = if isFunction' fn then fn else import fn;
    in
    makeOverridable f (builtins.intersectAttrs (functionArgs' f) autoArgs // args);
  makeScope =
    newScope: f:
    let
      self = f self // {
        newScope = scope: newScope (self // scope);
        callPackage = self.newScope { };
        overrideScope = g: makeScope newScope (extends g f);
        packages = f;
      };
    in
    self;

  # lib/attrsets.nix
  getOutput =
    output: pkg:
    if !pkg ? outputSpecified || !pkg.outputSpecified then pkg.${output} or pkg.out or pkg else pkg;
  getFirstOutput =
    candidates: pkg:
    let
      outputs = filter (name: pkg ? ${name}) candidates;
    in
    if pkg.outputSpecified or false || outputs == [ ] then pkg else pkg.${builtins.head outputs};
  nameValuePair = name: value: { inherit name value; };

  # lib/lists.nix
  unique = foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ];
  last = list: builtins.elemAt list (builtins.length list - 1);

  # lib/strings.nix
  concatMapStringsSep = sep: f: list: concatStringsSep sep (map f list);
  splitVersion = builtins.splitVersion;
  hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;
  versionOlder = v: other: builtins.compareVersions v other < 0;
  versionAtLeast = v: min: builtins.compareVersions v min >= 0;
  getExe' = drv: name: "${getOutput "bin" drv}/bin/${name}";
in
{
  inherit
    fix
    extends
    composeExtensions
    warn
    setFunctionArgs
    mirrorFunctionArgs
    makeOverridable
    callPackageWith
    makeScope
    getOutput
    getFirstOutput
    nameValuePair
    unique
    last
    concatMapStringsSep
    hasPrefix
    versionOlder
    versionAtLeast
    getExe'
    ;
  functionArgs = functionArgs';
  isFunction = isFunction';
  toList = x: if isList x then x else [ x ];
  id = x: x;
  warnIf = cond: msg: if cond then warn msg else x: x;
  throwIf = cond: msg: if cond then throw msg else x: x;
  composeManyExtensions = foldl' composeExtensions (final: prev: { });
  genAttrs = names: f: builtins.listToAttrs (map (n: nameValuePair n (f n)) names);
  mapAttrs = builtins.mapAttrs;
  attrValues = builtins.attrValues;
  filterAttrs = pred: set: builtins.removeAttrs set (filter (n: !pred n set.${n}) (attrNames set));
  optional = cond: x: if cond then [ x ] else [ ];
  optionals = cond: xs: if cond then xs else [ ];
  optionalString = cond: s: if cond then s else "";
  optionalAttrs = cond: set: if cond then set else { };
  concatStringsSep = builtins.concatStringsSep;
  concatMap = builtins.concatMap;
  intersectLists = e: filter (x: elem x e);
  subtractLists = e: filter (x: !(elem x e));
  makeBinPath = concatMapStringsSep ":" (p: "${getOutput "bin" p}/bin");
  makeLibraryPath = concatMapStringsSep ":" (p: "${getOutput "lib" p}/lib");
  getExe = drv: "${getOutput "bin" drv}/bin/${drv.meta.mainProgram}";
  getLib = getOutput "lib";
  getDev = getOutput "dev";
  getBin = getOutput "bin";
  getInclude = getFirstOutput [
    "include"
    "dev"
    "out"
  ];
  getStatic = getFirstOutput [
    "static"
    "lib"
    "out"
  ];
  versions = {
    major = v: builtins.elemAt (splitVersion v) 0;
    majorMinor =
      v:
      let
        parts = splitVersion v;
      in
      "${builtins.elemAt parts 0}.${builtins.elemAt parts 1}";
  };
  licenses = {
    mit = {
      shortName = "MIT";
      spdxId = "MIT";
      free = true;
    };
    bsd3 = {
      shortName = "bsd3";
      spdxId = "BSD-3-Clause";
      free = true;
    };
    # lib/licenses.nix: what nixpkgs' CUDA redistributables carry.
    nvidiaCudaRedist = {
      shortName = "CUDA EULA";
      fullName = "CUDA Toolkit End User License Agreement (EULA)";
      free = false;
    };
    unfree = {
      shortName = "unfree";
      free = false;
    };
  };
  sourceTypes = {
    binaryNativeCode = {
      shortName = "binaryNativeCode";
      isSource = false;
    };
  };
  platforms = {
    linux = [
      "x86_64-linux"
      "aarch64-linux"
    ];
  };
  fileset = {
    # Records what would be copied: nixcuda's package selects files with these.
    unions = files: {
      _type = "fileset-stub";
      inherit files;
    };
    toSource =
      { root, fileset }:
      {
        _type = "source-stub";
        outPath = toString root;
        inherit root fileset;
      };
  };
}
