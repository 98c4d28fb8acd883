# closure-audit, built from this repository, and closureAuditCheck, its
# judgement of a package as a derivation Hydra builds (docs/nix/checks.md).
final: prev: {
  closure-audit = final.callPackage ../pkgs/closure-audit/package.nix { };
  closureAuditCheck = import ../pkgs/closure-audit/check.nix {
    inherit (final)
      runCommand
      closureInfo
      closure-audit
      python3
      ;
  };
}
