# What the output lists cannot say: each redistributable's run-time
# dependencies inside its own package set (for autoPatchelf), and packages that
# need an exception. A function of the package set, so a member of one CUDA
# release's set only ever depends on members of the same set.
#
# allowFHSReferences: compiled-in default paths (/usr/include, /usr/lib/debug,
# /usr/share/zoneinfo), found by searching NVIDIA's 12.9 and 13.0 wheels for
# "/usr/"; the split hook's FHS check would refuse these packages for strings
# they cannot drop.
cudaPackages: {
  libcusolver.deps = with cudaPackages; [
    libcublas
    libcusparse
    libnvjitlink
  ];
  libcusparse.deps = [ cudaPackages.libnvjitlink ];
  libcufft.deps = [ cudaPackages.libnvjitlink ];
  cudnn = {
    deps = with cudaPackages; [
      libcublas
      cuda_nvrtc
    ];
    allowFHSReferences = true;
  };
  cuda_crt.allowFHSReferences = true;
  cuda_cupti.allowFHSReferences = true;
  cuda_nvcc.allowFHSReferences = true;
  cuda_nvrtc.allowFHSReferences = true;
  cuda_sanitizer_api.allowFHSReferences = true;
  libnvvm.allowFHSReferences = true;
}
