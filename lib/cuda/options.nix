# Validation of the CUDA options, all problems at once, in words a user can act on.
{ capabilities }:
let
  inherit (capabilities)
    parse
    known
    support
    supportedBy
    supportedCapabilities
    sort
    isJetson
    archName
    ;

  unique = builtins.foldl' (acc: x: if builtins.elem x acc then acc else acc ++ [ x ]) [ ];
  join = builtins.concatStringsSep;
  # A value as a message shows it, the same on every Nix: toJSON prints the
  # float 9.0 as 9 on Nix 2.8 and as 9.0 on newer Nix; here it is always 9.0.
  show =
    x:
    let
      json = builtins.toJSON x;
    in
    if builtins.isString x then
      "\"${x}\""
    else if builtins.isFloat x && builtins.match "-?[0-9]+" json != null then
      "${json}.0"
    else
      json;

  # The non-Jetson baseline capabilities a CUDA release supports: what an empty
  # cudaCapabilities builds for.
  defaultCapabilities =
    cudaVersion:
    builtins.filter (c: (parse c).variant == "" && !isJetson c) (supportedCapabilities cudaVersion);

  range =
    name:
    let
      s = support name;
    in
    if s.last == null then
      "CUDA ${s.first} and newer"
    else if s.first == s.last then
      "CUDA ${s.first} only"
    else
      "CUDA ${s.first} to ${s.last}";

  # A list of problems (strings); empty when the options are usable.
  validate =
    {
      capabilities,
      cudaVersion,
      forwardCompat ? true,
      system ? null,
      ...
    }:
    let
      versionOk = builtins.isString cudaVersion && builtins.match "[0-9]+\\.[0-9]+" cudaVersion != null;
      listOk = builtins.isList capabilities;
      strings = builtins.filter builtins.isString capabilities;
      nonStrings = builtins.filter (x: !builtins.isString x) capabilities;
      unknown = builtins.filter (c: !known c) strings;
      usable = builtins.filter known strings;
      unsupported = builtins.filter (c: !supportedBy cudaVersion c) usable;
      valid = builtins.filter (supportedBy cudaVersion) usable;
      jetson = unique (builtins.filter isJetson valid);
      discrete = unique (builtins.filter (c: !isJetson c) valid);
    in
    if !versionOk then
      [ "cudaVersion must be a CUDA release such as \"13.0\", not ${show cudaVersion}" ]
    else if !listOk then
      [ "cudaCapabilities must be a list of strings such as [ \"8.6\" \"9.0\" ], not ${show capabilities}" ]
    else
      map (x: "cudaCapabilities: ${show x} is not a string; capabilities are strings such as \"8.6\"") nonStrings
      ++ map (
        c:
        "cudaCapabilities: \"${c}\" is not a CUDA capability; CUDA ${cudaVersion} supports "
        + join ", " (supportedCapabilities cudaVersion)
      ) (unique unknown)
      ++ map (
        c: "cudaCapabilities: \"${c}\" (${archName c}) is not supported by CUDA ${cudaVersion}; ${range c} support it"
      ) (unique unsupported)
      ++ (
        if jetson != [ ] && discrete != [ ] then
          [
            "cudaCapabilities mixes Jetson capabilities (${join ", " jetson}) with discrete GPUs (${join ", " discrete}); a build targets one or the other"
          ]
        else
          [ ]
      )
      ++ (
        if jetson != [ ] && system != null && system != "aarch64-linux" then
          [ "Jetson capabilities (${join ", " jetson}) need an aarch64-linux system, not ${system}" ]
        else
          [ ]
      )
      ++ (
        if builtins.isBool forwardCompat then
          [ ]
        else
          [ "cudaForwardCompat must be true or false, not ${show forwardCompat}" ]
      );

  # The capabilities to build for: validated, sorted, de-duplicated; the
  # release's defaults when none are given. Throws with every problem.
  resolve =
    args@{
      capabilities ? [ ],
      cudaVersion,
      ...
    }:
    let
      problems = validate (args // { inherit capabilities; });
    in
    if problems != [ ] then
      throw ("nixcuda: invalid CUDA options:\n" + join "\n" (map (p: "  - ${p}") problems))
    else if capabilities == [ ] then
      defaultCapabilities cudaVersion
    else
      sort (unique capabilities);
in
{
  inherit validate defaultCapabilities resolve;
}
