# CONTRACT STUB, not nixpkgs: magma (pkgs/by-name/ma/magma/package.nix). Its
# arguments, the CUDA inputs it reads from its cudaPackages, and meta.broken:
# dynamic CUDA support is broken, so only the static build evaluates with CUDA
# (top level: magma, magma-cuda, magma-cuda-static).
{
  lib,
  stdenv,
  config,
  cudaPackages,
  cmake,
  cudaSupport ? config.cudaSupport,
  rocmSupport ? !cudaSupport,
  static ? false,
}:
stdenv.mkDerivation {
  pname = "magma";
  version = "2.9.0";
  outputs = [
    "out"
    "test"
  ];
  nativeBuildInputs = [ cmake ] ++ lib.optionals cudaSupport [ cudaPackages.cuda_nvcc ];
  buildInputs = lib.optionals cudaSupport (
    with cudaPackages;
    [
      cuda_cccl
      cuda_cudart
      libcublas
      libcusparse
      cuda_profiler_api
    ]
  );
  cmakeFlags = lib.optionals cudaSupport [
    "-DCMAKE_CUDA_ARCHITECTURES=${cudaPackages.flags.cmakeCudaArchitecturesString}"
    "-DMIN_ARCH=${builtins.head (builtins.sort lib.versionOlder (map cudaPackages.flags.dropDots cudaPackages.flags.cudaCapabilities))}0"
  ];
  passthru = {
    inherit cudaPackages cudaSupport rocmSupport;
  };
  meta = {
    license = lib.licenses.bsd3;
    platforms = lib.platforms.linux;
    broken = (cudaSupport && !static) || !(cudaSupport || rocmSupport) || (cudaSupport && rocmSupport);
  };
}
