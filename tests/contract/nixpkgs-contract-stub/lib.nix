# CONTRACT STUB, not nixpkgs: the subset of nixpkgs' `lib` that nixcuda's
# overlay and flake call, with the same names and argument shapes as nixpkgs
# at the revision pinned in flake.lock. Anything else is missing on purpose:
# an evaluation that needs more fails, naming the attribute.
let
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
  toList = x: if builtins.isList x then x else [ x ];
  warn = msg: builtins.trace "evaluation warning: ${msg}";
  concatMapStringsSep = sep: f: list: builtins.concatStringsSep sep (map f list);
in
{
  inherit fix extends toList warn;
  warnIf = cond: msg: if cond then builtins.trace "evaluation warning: ${msg}" else x: x;
  composeManyExtensions = builtins.foldl' composeExtensions (final: prev: { });
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  mapAttrs = builtins.mapAttrs;
  filterAttrs = pred: set: builtins.removeAttrs set (builtins.filter (n: !pred n set.${n}) (builtins.attrNames set));
  optional = cond: x: if cond then [ x ] else [ ];
  optionals = cond: xs: if cond then xs else [ ];
  optionalString = cond: s: if cond then s else "";
  optionalAttrs = cond: set: if cond then set else { };
  concatStringsSep = builtins.concatStringsSep;
  inherit concatMapStringsSep;
  makeBinPath = concatMapStringsSep ":" (p: "${p}/bin");
  makeLibraryPath = concatMapStringsSep ":" (p: "${p.lib or p}/lib");
  getExe = drv: "${drv}/bin/${drv.meta.mainProgram}";
  getOutput = output: drv: drv.${output} or drv;
  getLib = drv: drv.lib or drv;
  getDev = drv: drv.dev or drv;
  getBin = drv: drv.bin or drv;
  versionAtLeast = v: min: builtins.compareVersions v min >= 0;
  versions.majorMinor =
    v:
    let
      parts = builtins.filter builtins.isString (builtins.split "\\." v);
    in
    "${builtins.elemAt parts 0}.${builtins.elemAt parts 1}";
  unique = builtins.foldl' (acc: x: if builtins.elem x acc then acc else acc ++ [ x ]) [ ];
  versionOlder = v: other: builtins.compareVersions v other < 0;
  hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;
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
