# CONTRACT STUB, not nixpkgs: the interface of nixpkgs' PyTorch
# (pkgs/development/python-modules/torch/source/default.nix) that nixcuda's
# override relies on: its arguments, and the attributes it sets and the
# override changes (outputs, inputs, preConfigure, extraRunpaths, passthru).
{
  lib,
  config,
  buildPythonPackage,
  cudaSupport ? config.cudaSupport,
  cudaPackages,
  autoAddDriverRunpath,
  effectiveMagma ? if cudaSupport then magma-cuda-static else magma,
  magma,
  magma-cuda-static,
  useSystemNccl ? cudaSupport,
  cmake,
  ninja,
}:
let
  gpuTargetString = builtins.concatStringsSep ";" cudaPackages.flags.cudaCapabilities;
in
buildPythonPackage {
  pname = "torch";
  version = "2.9.1";
  pyproject = true;
  outputs = [ "out" "dev" "lib" "cxxdev" ];
  cudaPropagateToOutput = "cxxdev";
  postPatch = ''
    substituteInPlace cmake/public/cuda.cmake --replace-fail 'message(FATAL_ERROR "Found two conflicting CUDA' 'message(WARNING "Found two conflicting CUDA'
  '';
  preConfigure = lib.optionalString cudaSupport ''
    export TORCH_CUDA_ARCH_LIST="${gpuTargetString}"
  '';
  nativeBuildInputs = [ cmake ninja ] ++ lib.optionals cudaSupport [ autoAddDriverRunpath cudaPackages.cuda_nvcc ];
  buildInputs =
    lib.optionals cudaSupport (
      with cudaPackages;
      [
        cuda_cccl
        cuda_cudart
        cuda_cupti
        cuda_nvcc
        cuda_nvml_dev
        cuda_nvrtc
        cuda_nvtx
        cusparselt
        libcublas
        libcufft
        libcufile
        libcurand
        libcusolver
        libcusparse
        cudnn
        cuda_profiler_api
      ]
      ++ lib.optionals useSystemNccl [ nccl ]
    )
    ++ lib.optionals cudaSupport [ effectiveMagma ];
  USE_NCCL = if useSystemNccl then "1" else "0";
  extraRunpaths = lib.optionals cudaSupport [ "${lib.getLib cudaPackages.cuda_nvrtc}/lib" ];
  passthru = {
    inherit cudaSupport cudaPackages;
    cudaCapabilities = if cudaSupport then cudaPackages.flags.cudaCapabilities else [ ];
  };
  meta = {
    description = "PyTorch: Tensors and Dynamic neural networks in Python with strong GPU acceleration";
    license = lib.licenses.bsd3;
    platforms = lib.platforms.linux;
  };
}
