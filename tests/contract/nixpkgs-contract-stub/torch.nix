# CONTRACT STUB, not nixpkgs: nixpkgs' PyTorch 2.9.1
# (pkgs/development/python-modules/torch/source/default.nix, read at 6b516b42)
# as the overlay meets it: its arguments (no `...`: an argument it does not
# take is an error), which inputs it reads from cudaPackages, its
# brokenConditions and meta.broken, the postPatch that records the C++
# compiler for torch.compile, cudaPropagateToOutput, TORCH_CUDA_ARCH_LIST from
# flags.cudaCapabilities limited to its own list (an error when nothing is
# left), extraRunpaths and passthru.
{
  lib,
  stdenv,
  config,
  buildPythonPackage,
  python,
  targetPackages,
  cudaSupport ? config.cudaSupport,
  cudaPackages,
  autoAddDriverRunpath,
  effectiveMagma ?
    if cudaSupport then
      magma-cuda-static
    else
      magma,
  magma,
  magma-cuda-static,
  useSystemNccl ? (cudaSupport && cudaPackages.nccl.meta.available || rocmSupport),
  MPISupport ? false,
  mpi,
  cmake,
  ninja,
  openssl,
  filelock,
  tritonSupport ? (!stdenv.hostPlatform.isDarwin),
  triton,
  _tritonEffective ? if cudaSupport then triton-cuda else triton,
  triton-cuda,
  rocmSupport ? config.rocmSupport,
  gpuTargets ? [ ],
}:
let
  inherit (cudaPackages) cudnn flags nccl;
  # torch/utils/cpp_extension.py of v2.8.0, as nixpkgs lists it for 2.9.1.
  real = [
    "3.5" "3.7" "5.0" "5.2" "5.3" "6.0" "6.1" "6.2" "7.0" "7.2" "7.5" "8.0" "8.6" "8.7" "8.9" "9.0" "9.0a"
    "10.0" "10.0" "10.0a" "10.1" "10.1a" "10.3" "10.3a" "12.0" "12.0a" "12.1" "12.1a"
  ];
  supportedTorchCudaCapabilities = real ++ map (x: "${x}+PTX") real;
  supportedCudaCapabilities = lib.intersectLists flags.cudaCapabilities supportedTorchCudaCapabilities;
  unsupportedCudaCapabilities = lib.subtractLists supportedCudaCapabilities flags.cudaCapabilities;
  gpuArchWarner =
    supported: unsupported:
    lib.throwIf (supported == [ ]) (
      "No supported GPU targets specified. Requested GPU targets: " + builtins.concatStringsSep ", " unsupported
    ) supported;
  gpuTargetString = builtins.concatStringsSep ";" (
    if gpuTargets != [ ] then
      gpuTargets
    else if cudaSupport then
      gpuArchWarner supportedCudaCapabilities unsupportedCudaCapabilities
    else
      throw "No GPU targets specified"
  );
  brokenConditions = lib.filterAttrs (_: cond: cond) {
    "CUDA and ROCm are mutually exclusive" = cudaSupport && rocmSupport;
    "CUDA is not targeting Linux" = cudaSupport && !stdenv.hostPlatform.isLinux;
    "Unsupported CUDA version" =
      cudaSupport
      && !(builtins.elem cudaPackages.cudaMajorVersion [
        "11"
        "12"
      ]);
    "MPI cudatoolkit does not match cudaPackages.cudatoolkit" =
      MPISupport && cudaSupport && (mpi.cudatoolkit != cudaPackages.cudatoolkit);
    "Magma cudaPackages does not match cudaPackages" =
      cudaSupport && (effectiveMagma.cudaPackages.cudaMajorMinorVersion != cudaPackages.cudaMajorMinorVersion);
  };
in
buildPythonPackage {
  pname = "torch";
  version = "2.9.1";
  pyproject = true;
  outputs = [
    "out"
    "dev"
    "lib"
    "cxxdev"
  ];
  cudaPropagateToOutput = "cxxdev";
  postPatch = ''
    substituteInPlace torch/_inductor/codecache.py --replace-fail '"openssl"' '"${lib.getExe' openssl "openssl"}"'
    substituteInPlace cmake/public/cuda.cmake --replace-fail 'message(FATAL_ERROR "Found two conflicting CUDA' 'message(WARNING "Found two conflicting CUDA'
    substituteInPlace torch/_inductor/config.py \
      --replace-fail '"clang++" if sys.platform == "darwin" else "g++"' '"${lib.getExe' targetPackages.stdenv.cc "${targetPackages.stdenv.cc.targetPrefix}c++"}"'
  '';
  preConfigure =
    lib.optionalString cudaSupport ''
      export TORCH_CUDA_ARCH_LIST="${gpuTargetString}"
      export CUPTI_INCLUDE_DIR=${lib.getDev cudaPackages.cuda_cupti}/include
      export CUPTI_LIBRARY_DIR=${lib.getLib cudaPackages.cuda_cupti}/lib
    ''
    + lib.optionalString (cudaSupport && cudaPackages ? cudnn) ''
      export CUDNN_INCLUDE_DIR=${lib.getLib cudnn}/include
      export CUDNN_LIB_DIR=${lib.getLib cudnn}/lib
    '';
  nativeBuildInputs = [
    cmake
    ninja
  ]
  ++ lib.optionals cudaSupport [
    autoAddDriverRunpath
    cudaPackages.cuda_nvcc
  ];
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
        libcublas
        libcufft
        libcufile
        libcurand
        libcusolver
        libcusparse
        libcusparse_lt
      ]
      ++ lib.optionals (cudaPackages ? cudnn) [ cudnn ]
      ++ lib.optionals useSystemNccl [
        (lib.getDev nccl)
        (lib.getOutput "static" nccl)
      ]
      ++ [ cuda_profiler_api ]
    )
    ++ lib.optionals (cudaSupport || rocmSupport) [ effectiveMagma ]
    ++ lib.optionals tritonSupport [ _tritonEffective ]
    ++ lib.optionals MPISupport [ mpi ];
  dependencies = [ filelock ] ++ lib.optionals tritonSupport [ _tritonEffective ];
  USE_NCCL = if useSystemNccl then "1" else "0";
  extraRunpaths = lib.optionals cudaSupport [ "${lib.getLib cudaPackages.cuda_nvrtc}/lib" ];
  passthru = {
    inherit cudaSupport cudaPackages rocmSupport brokenConditions;
    cudaCapabilities = if cudaSupport then supportedCudaCapabilities else [ ];
  };
  meta = {
    description = "PyTorch: Tensors and Dynamic neural networks in Python with strong GPU acceleration";
    license = lib.licenses.bsd3;
    platforms = lib.platforms.linux;
    broken = builtins.any (x: x) (builtins.attrValues brokenConditions);
  };
}
