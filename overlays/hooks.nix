# Setup hooks, as nixpkgs exposes its own (makeSetupHook). nixpkgs'
# autoAddDriverRunpath is left alone; overlays/driver-runpath.nix swaps it for
# this project's hook everywhere, as an opt-in.
final: prev: {
  # Every dynamic ELF file of every output gets the driver directory in its
  # RUNPATH, idempotently, stubs entries replaced (hooks/auto-add-opengl-runpath-hook.sh).
  autoAddOpenGLRunpathHook = final.makeSetupHook {
    name = "auto-add-opengl-runpath-hook";
    propagatedBuildInputs = [ final.patchelf ];
    substitutions = { inherit (final.addDriverRunpath) driverLink; };
  } ../hooks/auto-add-opengl-runpath-hook.sh;

  # Splits an NVIDIA redistributable across its outputs (hooks/split-redist-outputs.sh),
  # by the rules redist-features reads too (lib/data/redist-split-rules.txt).
  splitRedistOutputsHook = final.makeSetupHook {
    name = "split-redist-outputs-hook";
    substitutions.redistSplitRules = builtins.readFile ../lib/data/redist-split-rules.txt;
  } ../hooks/split-redist-outputs.sh;
}
