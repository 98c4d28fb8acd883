# The CUDA set's checks (docs/nix/checks.md): a closureAuditCheck for every
# output of every redistributable of nixcuda's cudaPackages_* sets
# (cudaPackages_13_0.libcublas.lib), each with the policy of what the output
# is for, and, under `packages`, for every package of the set (top level and
# python3Packages) that carries CUDA code; and `index`, a job
# listing every check and every package left without one, with the reason.
# Which packages carry CUDA code is decided at evaluation, without building:
# those whose inputs hold a CUDA redistributable (below).
{ pkgs }:
let
  inherit (pkgs) lib config;
  check = pkgs.closureAuditCheck;
  system = pkgs.stdenv.hostPlatform.system;

  # Output names by what they are for. Runtime outputs are judged by the
  # forbidden list and the budgets, and their ELF files by the capabilities.
  # A redistributable's `out` is built for building: the split hook makes it
  # propagate `dev` (pkgs/cuda/redist.nix), so its closure is dev's.
  isBuildOutput = drv: o: builtins.elem o [ "dev" "include" ] || (o == "out" && builtins.elem "dev" drv.outputs);

  # The store name of an output, which the output's own rule exempts: the
  # built-in list forbids every `*-static` and `*-stubs` path.
  storeName =
    drv:
    let
      base = baseNameOf drv.outPath;
    in
    builtins.unsafeDiscardStringContext (builtins.substring 33 (builtins.stringLength base) base);

  # The policy of one output (docs/nix/checks.md#per-output-policies).
  # dev/include (and out beside dev): headers and build files; they may name
  # the package's static and stub libraries, which a build links, never the
  # toolkit or a compiler. static and stubs: only themselves of their kind.
  # Others: runtime outputs.
  policyOf =
    drv: o:
    if isBuildOutput drv o then
      {
        allow = [
          "*-static"
          "*-stubs"
        ];
      }
    else if o == "static" || o == "stubs" then
      { allow = [ (storeName drv.${o}) ]; }
    else
      { };
  isRuntime = drv: o: !(isBuildOutput drv o || o == "static" || o == "stubs");

  # Why nixpkgs refuses to evaluate `drv`, in check-meta's order
  # (pkgs/stdenv/generic/check-meta.nix), or null when it does not.
  refusal =
    drv:
    let
      r = builtins.tryEval (refusalOf drv);
    in
    if r.success then r.value else "fails to evaluate";
  refusalOf =
    drv:
    let
      meta = drv.meta or { };
      licenses = lib.toList (meta.license or [ ]);
      unfree = builtins.any (l: builtins.isAttrs l && !(l.free or true)) licenses;
      predicate = config.allowUnfreePredicate or null;
      unfreeRefused =
        unfree && !(config.allowUnfree or false) && !(builtins.isFunction predicate && predicate drv);
      platforms = meta.platforms or null;
      unsupported =
        (platforms != null && !builtins.elem system platforms)
        || builtins.elem system (meta.badPlatforms or [ ]);
      brokenBy = map (a: a.message) (builtins.filter (a: !a.assertion) (drv.brokenAssertions or [ ]));
    in
    if unfreeRefused then
      "unfree license refused (${builtins.concatStringsSep ", " (map (l: l.shortName or "unknown") licenses)})"
    else if unsupported && !(config.allowUnsupportedSystem or false) then
      "unsupported on ${system}"
    else if (meta.broken or false) && !(config.allowBroken or false) then
      "broken" + lib.optionalString (brokenBy != [ ]) (": " + builtins.concatStringsSep "; " brokenBy)
    else if !(builtins.tryEval drv.drvPath).success then
      capabilityRefusal drv
    else
      null;
  # A package that says which requested capabilities it cannot build for
  # (droppedCudaCapabilities, as nixcuda's PyTorch does) and builds for none.
  capabilityRefusal =
    drv:
    let
      dropped = drv.droppedCudaCapabilities or [ ];
    in
    if dropped != [ ] && (drv.cudaCapabilities or [ ]) == [ ] then
      "unsupported for the requested capabilities (${builtins.concatStringsSep ", " dropped})"
    else
      inputRefusal drv;
  # A package nixpkgs accepts fails to evaluate when an input is refused:
  # the first such input and its reason.
  inputRefusal =
    drv:
    let
      inputs = builtins.filter builtins.isAttrs (
        (drv.buildInputs or [ ]) ++ (drv.propagatedBuildInputs or [ ]) ++ (drv.nativeBuildInputs or [ ])
      );
      refused = builtins.filter (r: r.why != null) (
        map (i: {
          name = i.name or "?";
          why =
            let
              t = builtins.tryEval (if (builtins.tryEval i.drvPath).success then null else refusalOf i);
            in
            if t.success then t.value else null;
        }) inputs
      );
    in
    if refused == [ ] then
      "fails to evaluate"
    else
      "input ${(builtins.head refused).name} refused: ${(builtins.head refused).why}";

  # -- the redistributables --------------------------------------------------
  setNames = map (v: "cudaPackages_" + builtins.replaceStrings [ "." ] [ "_" ] v) (import ../../lib).cuda.cudaVersions;
  # nixcuda's members: those built by pkgs/cuda/redist.nix.
  redistsOf =
    set: lib.filterAttrs (_: v: (builtins.tryEval (builtins.isAttrs v && v ? redistName)).value) set;
  redistEntries = builtins.concatMap (
    setName:
    let
      set = pkgs.${setName};
      capabilities = set.flags.cudaCapabilities or null;
    in
    builtins.concatMap (
      name:
      let
        drv = set.${name};
        why = refusal drv;
      in
      if why != null then
        [
          {
            path = [ setName name ];
            reason = why;
          }
        ]
      else
        map (o: {
          path = [
            setName
            name
            o
          ];
          check = check {
            package = drv;
            name = "${drv.name}-${o}-closure-audit";
            outputs = [ o ];
            policy = policyOf drv o;
            capabilities = if isRuntime drv o then capabilities else null;
            forwardCompat = if isRuntime drv o then set.flags.cudaForwardCompat or null else null;
          };
        }) drv.outputs
    ) (builtins.attrNames (redistsOf set))
  ) presentSets;
  presentSets = builtins.filter (n: pkgs ? ${n}) setNames;

  # -- the packages that carry CUDA code -------------------------------------
  # A CUDA redistributable: nixcuda's (redistName) or one of nixpkgs' CUDA
  # scopes, whose store names carry the release (cuda12.9-libcublas-...).
  isDerivation = v: builtins.isAttrs v && (v.type or null) == "derivation";
  isRedist = d: d ? redistName || builtins.match "cuda[0-9]+\\.[0-9]+-.*" (d.name or "") != null;
  inputsOf = d: (d.buildInputs or [ ]) ++ (d.propagatedBuildInputs or [ ]);
  # Whose inputs hold a redistributable, directly or through an input's
  # inputs (two levels: magma or NCCL between a package and cuBLAS).
  carriesCuda =
    depth: d:
    builtins.any (
      i: builtins.isAttrs i && (isRedist i || (depth > 0 && carriesCuda (depth - 1) i))
    ) (inputsOf d);
  candidate =
    v:
    let
      t = builtins.tryEval (isDerivation v && !isRedist v && carriesCuda 1 v);
    in
    t.success && t.value;
  scan =
    prefix: set:
    builtins.concatMap (
      name:
      let
        v = set.${name};
      in
      if candidate v then
        [
          {
            path = prefix ++ [ name ];
            drv = v;
          }
        ]
      else
        [ ]
    ) (builtins.attrNames set);
  # The attribute set's own tools are no CUDA packages of the set.
  own = [
    "closure-audit"
    "closureAuditCheck"
    "cudaClosureChecks"
  ];
  found =
    scan [ ] (builtins.removeAttrs pkgs own)
    ++ scan [ "python3Packages" ] (pkgs.python3Packages or { });
  packageEntries = map (
    e:
    let
      why = refusal e.drv;
      dropped = e.drv.droppedCudaCapabilities or [ ];
    in
    if why != null then
      {
        inherit (e) path;
        reason = why;
      }
    else
      {
        inherit (e) path;
        check = check {
          package = e.drv;
          capabilities = e.drv.cudaCapabilities or (e.drv.cudaPackages.flags.cudaCapabilities or null);
        };
      }
      // lib.optionalAttrs (dropped != [ ]) {
        note = "not built for ${builtins.concatStringsSep ", " dropped}, which it does not support";
      }
  ) found;

  entries = redistEntries ++ packageEntries;
  checked = builtins.filter (e: e ? check) redistEntries;
  nest = es: builtins.foldl' (acc: e: recursiveUpdate acc (setAt e.path e.check)) { } es;
  setAt = path: v: if path == [ ] then v else { ${builtins.head path} = setAt (builtins.tail path) v; };
  recursiveUpdate =
    a: b:
    a
    // builtins.mapAttrs (
      n: v: if a ? ${n} && builtins.isAttrs v && !(isDerivation v) then recursiveUpdate a.${n} v else v
    ) b;

  # What the index lists: every entry, checked or not, by attribute path.
  listing = map (
    e:
    {
      attr = builtins.concatStringsSep "." e.path;
      checked = e ? check;
    }
    // lib.optionalAttrs (e ? reason) { inherit (e) reason; }
    // lib.optionalAttrs (e ? note) { inherit (e) note; }
    // lib.optionalAttrs (e ? check) { name = e.check.name; }
  ) entries;
  index = pkgs.runCommand "cuda-closure-checks-index" {
    indexJson = builtins.toJSON {
      schema = "nixcuda-check-index/1";
      inherit system;
      jobs = listing;
    };
    checkedCount = toString (builtins.length (builtins.filter (e: e.checked) listing));
    skippedCount = toString (builtins.length (builtins.filter (e: !e.checked) listing));
    passthru.entries = listing;
  } ''
    mkdir -p $out/nix-support
    printf '%s\n' "$indexJson" > $out/index.json
    echo "file json $out/index.json" > $out/nix-support/hydra-build-products
    printf 'checks.count %s jobs\nchecks.skipped %s jobs\n' "$checkedCount" "$skippedCount" \
      > $out/nix-support/hydra-metrics
  '';
in
# The attribute names at the top come from the data (the sets) and never
# from the scan: one set's checks evaluate without scanning the package set.
builtins.listToAttrs (
  map (setName: {
    name = setName;
    value = (nest (builtins.filter (e: builtins.head e.path == setName) checked)).${setName} or { };
  }) presentSets
)
// {
  packages = nest (builtins.filter (e: e ? check) packageEntries);
  inherit index;
}
