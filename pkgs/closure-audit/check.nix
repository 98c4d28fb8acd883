# closureAuditCheck: closure-audit's judgement of one package, as a derivation
# Hydra builds (docs/nix/checks.md). The closure comes from closureInfo
# (exportReferencesGraph): nothing is fetched, no GPU is used and the store is
# not queried from inside the build. Builtins only, so that the contract stub
# and the tests' plain derivations can call it as nixpkgs does.
{
  runCommand,
  closureInfo,
  closure-audit,
  python3,
}:
let
  # Outputs a running program never needs: headers, static archives, stub
  # libraries, documentation. The runtime outputs are the others.
  buildTimeOutputs = [
    "dev"
    "cxxdev"
    "include"
    "static"
    "stubs"
    "doc"
    "devdoc"
    "man"
    "info"
    "debug"
  ];
  # ci/closure-budgets.toml's [defaults] hold for every check, as for every
  # target of that file; a policy adds to them or overrides them.
  defaults = (builtins.fromTOML (builtins.readFile ../../ci/closure-budgets.toml)).defaults;

  # A budgets file (docs/commands/gate.md) of one target, `closure`: each
  # value written as JSON is a TOML value too (strings, integers, lists of
  # strings).
  table =
    header: attrs:
    [ header ] ++ map (k: "${builtins.toJSON k} = ${builtins.toJSON attrs.${k}}") (builtins.attrNames attrs);
  budgetsToml =
    policy:
    builtins.concatStringsSep "\n" (
      [ ''schema = "closure-audit-budgets/1"'' ]
      ++ table "[defaults]" defaults
      ++ table "[targets.closure]" policy
    )
    + "\n";
in
{
  package,
  outputs ? builtins.filter (o: !builtins.elem o buildTimeOutputs) (package.outputs or [ "out" ]),
  # A `[targets.NAME]` table of the budgets format (docs/commands/gate.md):
  # max-closure-size, max-added-size, forbidden, allow. The forbidden list
  # is always the built-in one plus `forbidden`.
  policy ? { },
  capabilities ? package.cudaCapabilities or null,
  forwardCompat ? package.cudaForwardCompat or null,
  keepReport ? false,
  name ? "${package.name}-closure-audit",
}:
let
  roots = map (o: package.${o}) outputs;
  policyNames = builtins.attrNames policy;
  refused = builtins.filter (
    k:
    builtins.elem k [
      "installable"
      "path"
      "path-info"
      "baseline"
      "max-growth"
    ]
  ) policyNames;
in
assert
  outputs != [ ]
  || throw "closureAuditCheck ${package.name}: no output to check (outputs = [ ])";
assert
  refused == [ ]
  || throw "closureAuditCheck ${package.name}: policy cannot set ${builtins.concatStringsSep ", " refused} (the check judges the package's outputs; a growth limit needs a baseline the build does not have)";
runCommand name
  {
    nativeBuildInputs = [
      closure-audit
      python3
    ];
    closure = closureInfo { rootPaths = roots; };
    inherit roots;
    checkName = package.name;
    budgets = budgetsToml policy;
    capabilities = if capabilities == null then "" else builtins.concatStringsSep "," capabilities;
    forwardCompat =
      if forwardCompat == null then
        ""
      else if forwardCompat then
        "yes"
      else
        "no";
    keepReport = if keepReport then "1" else "";
    checker = ./check.py;
    passthru = {
      inherit
        package
        outputs
        policy
        capabilities
        keepReport
        ;
    };
  }
  ''
    printf '%s' "$budgets" > budgets.toml
    python3 "$checker" --name "$checkName" --registration "$closure/registration" \
      --budgets budgets.toml --out "$out" --capabilities "$capabilities" \
      --forward-compat "$forwardCompat" ''${keepReport:+--keep-report} $roots
  ''
