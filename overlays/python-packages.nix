# Python packages on nixcuda's CUDA sets: PyTorch (pkgs/torch) built against
# the split redistributables, for every Python version (pythonPackagesExtensions).
# Brings the CUDA sets and closure-audit, so it also works on its own.
final: prev:
let
  python = final: prev: {
    pythonPackagesExtensions = (prev.pythonPackagesExtensions or [ ]) ++ [
      (pyFinal: pyPrev: {
        torch = pyFinal.callPackage ../pkgs/torch {
          torch = pyPrev.torch;
          inherit (final) cudaPackages;
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
