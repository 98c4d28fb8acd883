# CONTRACT STUB, not nixpkgs: what pkgs/stdenv/generic/check-meta.nix decides
# for a derivation, in the order it checks: an unfree license is refused
# unless config.allowUnfree, or config.allowUnfreePredicate accepts the
# derivation's attributes; a package whose meta.platforms lacks the system, or
# whose meta.badPlatforms has it, is refused unless
# config.allowUnsupportedSystem; meta.broken is refused unless
# config.allowBroken. The message has nixpkgs' wording ("..., refusing to
# evaluate."). make-derivation.nix raises it when drvPath or an outPath is
# read, never for name, meta or passthru.
{ config, system }:
{ name, attrs }:
let
  meta = attrs.meta or { };
  licenses = if meta ? license then (if builtins.isList meta.license then meta.license else [ meta.license ]) else [ ];
  unfree = builtins.any (l: builtins.isAttrs l && !(l.free or true)) licenses;
  predicate = config.allowUnfreePredicate or null;
  unfreeRefused = unfree && !config.allowUnfree && !(builtins.isFunction predicate && predicate attrs);
  unsupported =
    (meta ? platforms && !builtins.elem system meta.platforms)
    || (meta ? badPlatforms && builtins.elem system meta.badPlatforms);
  refuse = reason: {
    valid = false;
    message = "Package ‘${name}’ ${reason}, refusing to evaluate.";
  };
in
if unfreeRefused then
  refuse "has an unfree license (‘${toString (map (l: l.shortName or "unknown") licenses)}’)"
else if unsupported && !config.allowUnsupportedSystem then
  refuse "is not available on the requested hostPlatform (${system})"
else if (meta.broken or false) && !config.allowBroken then
  refuse "is marked as broken"
else
  {
    valid = true;
    message = "";
  }
