# Python packages on nixcuda's CUDA sets: PyTorch (pkgs/torch) built against
# the split redistributables of the set pkgs/cuda/releases.json names for it,
# for every Python version (pythonPackagesExtensions). Builds on the CUDA sets
# and closure-audit (overlays/default.nix applies them first).
final: prev:
let
  torchSet = "cudaPackages_" + builtins.replaceStrings [ "." ] [ "_" ] (import ../lib).cuda.torchCudaVersion;
in
{
  pythonPackagesExtensions = (prev.pythonPackagesExtensions or [ ]) ++ [
    (pyFinal: pyPrev: {
      torch = pyFinal.callPackage ../pkgs/torch {
        torch = pyPrev.torch;
        cudaPackages = final.${torchSet};
      };
    })
  ];
}
