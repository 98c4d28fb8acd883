# closure-audit, built from this repository; closureAuditCheck, its
# judgement of a package as a derivation Hydra builds; cudaClosureChecks, one
# for every CUDA package of the set and the index of them
# (docs/nix/checks.md). The checks read the CUDA sets when evaluated, so they
# need the cuda-packages overlay (the default overlay has it).
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
  cudaClosureChecks = import ../pkgs/closure-audit/cuda-checks.nix { pkgs = final; };
}
