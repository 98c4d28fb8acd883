# Python packages on nixcuda's CUDA sets: PyTorch (pkgs/torch) built against
# the split redistributables of the set pkgs/cuda/releases.json names for it,
# for every Python version (pythonPackagesExtensions). Brings the CUDA sets and
# closure-audit, so it also works on its own.
final: prev:
let
  torchSet = "cudaPackages_" + builtins.replaceStrings [ "." ] [ "_" ] (import ../lib).cuda.torchCudaVersion;
  python = final: prev: {
    pythonPackagesExtensions = (prev.pythonPackagesExtensions or [ ]) ++ [
      (pyFinal: pyPrev: {
        torch = pyFinal.callPackage ../pkgs/torch {
          torch = pyPrev.torch;
          cudaPackages = final.${torchSet};
        };
      })
    ];
  };
in
prev.lib.composeManyExtensions [
  (import ./cuda-packages.nix)
  (import ./tools.nix)
  python
] final prev
