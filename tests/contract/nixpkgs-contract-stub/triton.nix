# CONTRACT STUB, not nixpkgs: triton (pkgs/development/python-modules/triton,
# as stored at 005ab72f, triton 3.6.0; the pinned version was not read) with CUDA: the inputs
# it reads from its cudaPackages, each of which must evaluate. ptxas (from
# cuda_nvcc) is patched in for run time, as are libcuda's stubs directory and
# libcublas.
{
  lib,
  config,
  buildPythonPackage,
  cudaPackages,
  filelock,
  setuptools,
  cudaSupport ? config.cudaSupport,
}:
buildPythonPackage {
  pname = "triton";
  version = "3.5.0";
  pyproject = true;
  patches = lib.optionals cudaSupport [
    "libcudaStubsDir=${lib.getOutput "stubs" cudaPackages.cuda_cudart}/lib/stubs"
    "cudaToolkitIncludeDirs=${lib.getInclude cudaPackages.cuda_cudart}/include"
    "nixpkgsExtraBinaryPaths=${lib.getExe' cudaPackages.cuda_nvcc "ptxas"}"
  ];
  postPatch = lib.optionalString cudaSupport ''
    substituteInPlace third_party/nvidia/include/cublas_instance.h \
      --replace-fail '"libcublas.so"' '"${lib.getLib cudaPackages.libcublas}/lib/libcublas.so"'
  '';
  dependencies = [
    filelock
    setuptools
  ];
  env = lib.optionalAttrs cudaSupport {
    CC = "${cudaPackages.backendStdenv.cc}/bin/cc";
    TRITON_PTXAS_PATH = lib.getExe' cudaPackages.cuda_nvcc "ptxas";
    TRITON_CUOBJDUMP_PATH = lib.getExe' cudaPackages.cuda_cuobjdump "cuobjdump";
    TRITON_NVDISASM_PATH = lib.getExe' cudaPackages.cuda_nvdisasm "nvdisasm";
    TRITON_CUDACRT_PATH = "${lib.getInclude cudaPackages.cuda_nvcc}";
    TRITON_CUDART_PATH = "${lib.getInclude cudaPackages.cuda_cudart}";
    TRITON_CUPTI_PATH = "${cudaPackages.cuda_cupti}";
  };
  passthru = {
    inherit cudaPackages cudaSupport;
  };
  meta = {
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
  };
}
