# What the output lists cannot say: each redistributable's run-time
# dependencies inside its own package set (for autoPatchelf), and packages that
# need an exception. Functions of the package set, so a member of one CUDA
# release's set only ever depends on members of the same set.
cudaPackages: {
  libcusolver.deps = with cudaPackages; [
    libcublas
    libcusparse
    libnvjitlink
  ];
  libcusparse.deps = [ cudaPackages.libnvjitlink ];
  libcufft.deps = [ cudaPackages.libnvjitlink ];
  libnpp.deps = [ ];
  cudnn.deps = with cudaPackages; [
    libcublas
    cuda_nvrtc
  ];
}
