# closure-audit, built from this repository.
final: prev: {
  closure-audit = final.callPackage ../pkgs/closure-audit/package.nix { };
}
