#!/bin/sh
# Build a small PyTorch-shaped tree with gcc, with the mistakes closure-audit
# finds in real CUDA wheels, and nothing else on the machine needed:
#   - an extension module whose libraries resolve through $ORIGIN RPATHs (fine);
#   - a plugin needing an MPI library that no one ships (unresolved-library);
#   - a CUDA stub directory in a runpath (stub-in-runpath);
#   - a build machine's path and an empty entry in runpaths (runpath-impure,
#     runpath-empty-entry);
#   - a library without runpath relying on its sibling being loaded first
#     (needs-preloaded-library, as NVIDIA's libcusolverMg does).
# Usage: examples/torch-like-tree.sh OUTDIR
set -eu
out=${1:?usage: $0 OUTDIR}
rm -rf "$out"
sp="$out/lib/python3.11/site-packages"
mkdir -p "$sp/torch/lib" "$sp/nvidia/cu13/lib" "$sp/nvidia/cu13/lib/stubs" "$sp/nvidia/nvshmem/lib"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo 'int f(void) { return 0; }' > "$work/f.c"
gcc -c -fPIC -o "$work/f.o" "$work/f.c"

lib() {  # lib OUT SONAME LDFLAGS...
  o=$1 soname=$2
  shift 2
  gcc -shared -o "$o" "$work/f.o" -Wl,-soname,"$soname" -Wl,--no-as-needed "$@"
}

cu="$sp/nvidia/cu13/lib"
lib "$cu/libcudart.so.13" libcudart.so.13
lib "$cu/libcublas.so.13" libcublas.so.13
lib "$cu/libcusolverMg.so.12" libcusolverMg.so.12 "$cu/libcublas.so.13"
lib "$cu/stubs/libcuda.so" libcuda.so.1
lib "$sp/torch/lib/libtorch_cuda.so" libtorch_cuda.so "$cu/libcudart.so.13" "$cu/libcublas.so.13" \
  -Wl,--disable-new-dtags,-rpath,'$ORIGIN/../../nvidia/cu13/lib:$ORIGIN'
lib "$sp/torch/_C.cpython-311-x86_64-linux-gnu.so" _C.so "$sp/torch/lib/libtorch_cuda.so" \
  -Wl,--disable-new-dtags,-rpath,'$ORIGIN/lib'
lib "$work/libmpi.so.40" libmpi.so.40
lib "$sp/nvidia/nvshmem/lib/nvshmem_bootstrap_mpi.so.3" nvshmem_bootstrap_mpi.so.3 "$work/libmpi.so.40" \
  -Wl,--enable-new-dtags,-rpath,'$ORIGIN:/data/tmp/openmpi_install/lib'
lib "$sp/nvidia/nvshmem/lib/libnvshmem_host.so.3" libnvshmem_host.so.3 "$cu/stubs/libcuda.so" \
  -Wl,--enable-new-dtags,-rpath,'$ORIGIN/../../cu13/lib/stubs::$ORIGIN'
echo "example tree: $out"
