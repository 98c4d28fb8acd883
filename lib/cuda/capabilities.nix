# The capability table (../data/cuda-capabilities.json) and what follows from it.
let
  data = builtins.fromJSON (builtins.readFile ../data/cuda-capabilities.json);
  table = data.capabilities;

  versionAtLeast = v: min: builtins.compareVersions v min >= 0;
  versionAtMost = v: max: builtins.compareVersions v max <= 0;

  # "9.0a" -> { name = "9.0a"; base = "9.0"; major = 9; minor = 0; variant = "a"; code = "90a"; }
  # null when the string is not of the form MAJOR.MINOR with an optional a or f.
  parse =
    name:
    let
      m = if builtins.isString name then builtins.match "([0-9]+)\\.([0-9]+)([af]?)" name else null;
    in
    if m == null then
      null
    else
      let
        major = builtins.elemAt m 0;
        minor = builtins.elemAt m 1;
        variant = builtins.elemAt m 2;
      in
      {
        inherit name variant;
        base = "${major}.${minor}";
        major = builtins.fromJSON major;
        minor = builtins.fromJSON minor;
        code = "${major}${minor}${variant}";
      };

  # Whether the capability named exists at all (in some CUDA release).
  known =
    name:
    let
      p = parse name;
    in
    p != null && table ? ${p.base} && (p.variant == "" || table.${p.base}.variants ? ${p.variant});

  # The CUDA releases that support a known capability: { first; last; } (last null: still supported).
  support =
    name:
    let
      p = parse name;
      entry = table.${p.base};
    in
    {
      first = if p.variant == "" then entry.first else entry.variants.${p.variant};
      inherit (entry) last;
    };

  supportedBy =
    cudaVersion: name:
    known name
    && (
      let
        s = support name;
      in
      versionAtLeast cudaVersion s.first && (s.last == null || versionAtMost cudaVersion s.last)
    );

  # Order: by major, minor, then baseline < a < f.
  lessThan =
    a: b:
    let
      pa = parse a;
      pb = parse b;
      rank = v: if v == "" then 0 else if v == "a" then 1 else 2;
    in
    if pa.major != pb.major then
      pa.major < pb.major
    else if pa.minor != pb.minor then
      pa.minor < pb.minor
    else
      rank pa.variant < rank pb.variant;

  sort = builtins.sort lessThan;

  # Every capability name, variants included, sorted.
  allNames = sort (
    builtins.concatLists (
      map (
        base: [ base ] ++ map (v: "${base}${v}") (builtins.attrNames table.${base}.variants)
      ) (builtins.attrNames table)
    )
  );

  supportedCapabilities = cudaVersion: builtins.filter (supportedBy cudaVersion) allNames;
in
{
  inherit
    table
    parse
    known
    support
    supportedBy
    supportedCapabilities
    sort
    allNames
    ;
  isJetson = name: table.${(parse name).base}.jetson;
  archName = name: table.${(parse name).base}.arch;
}
