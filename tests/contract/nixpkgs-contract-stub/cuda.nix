# CONTRACT STUB, not nixpkgs: the interface of nixpkgs' CUDA package sets
# (pkgs/development/cuda-modules, a scope made with makeScope) that nixcuda's
# overlay and nixpkgs' own PyTorch use. Members are records; a member built
# from others (nccl) takes them from the scope, as in nixpkgs, so an overlay
# that overrides the scope is seen by it.
{
  lib,
  record,
  config,
  stdenv,
}:
version:
let
  major = builtins.head (builtins.split "\\." version);
  mkScope =
    f:
    let
      self = f self // {
        overrideScope = g: mkScope (lib.extends g f);
        packages = f;
      };
    in
    self;
  member =
    name: extra:
    record "mkDerivation" (
      {
        pname = "cuda_${name}";
        version = "${version}.0";
        outputs = [ "out" "lib" "dev" ];
      }
      // extra
    ) { };
in
mkScope (self: {
  cudaMajorMinorVersion = version;
  cudaMajorVersion = major;
  cudaOlder = v: builtins.compareVersions version v < 0;
  cudaAtLeast = v: builtins.compareVersions version v >= 0;
  backendStdenv = stdenv // {
    cc = record "cc-wrapper" { name = "gcc-wrapper-14.3.0"; } { };
  };
  # nixpkgs' flags: its own names, from the same config options.
  flags = {
    cudaCapabilities = config.cudaCapabilities;
    isJetsonBuild = false;
    gencode = [ ];
  };
  # The compiler and its parts, with nixpkgs' setup hooks.
  cuda_nvcc = member "nvcc" { setupHook = "nvcc-setup-hook"; };
  cuda_crt = member "crt" { };
  libnvvm = member "libnvvm" { };
  # Libraries and headers, which nixcuda's split redistributables replace.
  cuda_cccl = member "cccl" { };
  cuda_cudart = member "cudart" { };
  cuda_cupti = member "cupti" { };
  cuda_nvml_dev = member "nvml_dev" { };
  cuda_nvrtc = member "nvrtc" { };
  cuda_nvtx = member "nvtx" { };
  cuda_profiler_api = member "profiler_api" { };
  libcublas = member "libcublas" { };
  libcufft = member "libcufft" { };
  libcufile = member "libcufile" { };
  libcurand = member "libcurand" { };
  libcusolver = member "libcusolver" { };
  libcusparse = member "libcusparse" { };
  libnvjitlink = member "libnvjitlink" { };
  cudnn = member "cudnn" { };
  # The monolithic toolkit: a symlinkJoin of everything.
  cudatoolkit = record "symlinkJoin" {
    name = "cuda-merged-${version}";
    paths = [ self.cuda_nvcc self.cuda_cudart self.libcublas ];
  } { };
  # Built from source against the scope's members.
  nccl = record "mkDerivation" {
    pname = "nccl";
    version = "2.27.7-1";
    outputs = [ "out" "dev" ];
    buildInputs = [ self.cuda_cudart ];
    nativeBuildInputs = [ self.cuda_nvcc ];
    meta.unsupported = false;
  } { };
  cusparselt = record "mkDerivation" {
    pname = "libcusparse_lt";
    version = "0.8.1";
    outputs = [ "out" "lib" "dev" ];
  } { };
  autoAddCudaCompatRunpath = record "makeSetupHook" { name = "auto-add-cuda-compat-runpath-hook"; } { };
})
