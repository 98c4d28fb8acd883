# Setup hooks, as nixpkgs exposes its own (makeSetupHook).
final: prev: {
  # Every dynamic ELF file of every output gets the driver directory in its
  # RUNPATH, idempotently, stubs entries replaced (hooks/auto-add-opengl-runpath-hook.sh).
  autoAddOpenGLRunpathHook = final.makeSetupHook {
    name = "auto-add-opengl-runpath-hook";
    propagatedBuildInputs = [ final.patchelf ];
  } ../hooks/auto-add-opengl-runpath-hook.sh;
  # nixpkgs' newer name for the same job.
  autoAddDriverRunpath = final.autoAddOpenGLRunpathHook;

  # Splits an NVIDIA redistributable across its outputs (hooks/split-redist-outputs.sh).
  splitRedistOutputsHook = final.makeSetupHook {
    name = "split-redist-outputs-hook";
  } ../hooks/split-redist-outputs.sh;
}
