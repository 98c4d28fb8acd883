"""The Nix expressions of the closure fixture that the closure commands' tests
build: FIXTURE, and NEWER, a later torch beside it (for diff and gate).

The fixture closure (every edge is a real reference Nix registered):

  torch-2.9.0 ──runpath (used + unused)──▶ cudatoolkit-12.4.1
     │ ├─text (share/cmake/TorchConfig.cmake)─▶ magma-2.7.2
     │ ├─bare hash, no /nix/store/ (share/doc/build-info.txt)─▶ fixture-blas-1.0-lib (self-reference)
     │ ├─elf-string (lib/libtorch_python.so)─▶ fixture-a-1.0 ──text──▶ fixture-c-1.0 ──text──▶ fixture-d-1.0
     │ └─symlink (share/b-link)───────────────▶ fixture-b-1.0 ──symlink─▶ fixture-c-1.0
"""

FIXTURE = r"""
rec {
  cudatoolkit = sh "cudatoolkit-12.4.1" ''
    mkdir -p $out/lib $out/lib64
    echo 'int cudart(void) { return 12; }' > c.c
    gcc -shared -fPIC -o $out/lib/libcudart.so.12 c.c -Wl,-soname,libcudart.so.12
  '';
  magma = sh "magma-2.7.2" ''
    mkdir -p $out/lib
    echo 'int magma(void) { return 2; }' > m.c
    gcc -shared -fPIC -o $out/lib/libmagma.so m.c
  '';
  blas = shOutputs "fixture-blas-1.0" [ "out" "lib" "dev" ] ''
    mkdir -p $lib/lib $dev/include $dev/nix-support $out/nix-support
    echo 'int blas(void) { return 1; }' > b.c
    gcc -shared -fPIC -o $lib/lib/libblas.so b.c -Wl,-soname,libblas.so -Wl,--enable-new-dtags,-rpath,$lib/lib
    echo 'int blas(void);' > $dev/include/blas.h
    echo "$lib" > $dev/nix-support/propagated-build-inputs
    echo "$dev" > $out/nix-support/propagated-build-inputs
  '';
  d = sh "fixture-d-1.0" ''
    mkdir -p $out
    yes d | head -c 50000 > $out/blob
  '';
  c = sh "fixture-c-1.0" ''
    mkdir -p $out/share
    echo "${d}" > $out/share/ref.txt
    yes c | head -c 20000 > $out/share/pad
  '';
  a = sh "fixture-a-1.0" ''
    echo "${c}/share/data" > $out
  '';
  b = sh "fixture-b-1.0" ''
    mkdir -p $out
    ln -s ${c} $out/c-link
  '';
  # blasLib makes blas.lib an input, so Nix scans the output for its hash.
  torch = builtins.derivation {
    name = "torch-2.9.0"; inherit system; builder = "/bin/sh"; blasLib = blas.lib;
    PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-ec" ''
    mkdir -p $out/lib $out/share/cmake $out/share/doc
    echo 'int cudart(void); int t(void) { return cudart(); }' > t.c
    gcc -shared -fPIC -o $out/lib/libtorch_cuda.so t.c -L${cudatoolkit}/lib -l:libcudart.so.12 \
      -Wl,--enable-new-dtags,-rpath,${cudatoolkit}/lib:${cudatoolkit}/lib64
    echo 'int g(void) { return 0; }' > g.c
    gcc -shared -fPIC -o $out/lib/libtorch_global_deps.so g.c -Wl,--enable-new-dtags,-rpath,${cudatoolkit}/lib64
    echo 'const char *where = "${a}";' > p.c
    gcc -shared -fPIC -o $out/lib/libtorch_python.so p.c
    printf 'set(MAGMA_ROOT "%s")\n' ${magma} > $out/share/cmake/TorchConfig.cmake
    printf 'built against: %s\n' "$(basename $blasLib | cut -c1-32)" > $out/share/doc/build-info.txt
    ln -s ${b} $out/share/b-link
  '' ];
  };
}
"""

NEWER = r"""
  torch2 = builtins.derivation {
    name = "torch-2.9.1"; inherit system; builder = "/bin/sh";
    PATH = "/usr/local/bin:/usr/bin:/bin";
    args = [ "-ec" ''
      mkdir -p $out/lib
      echo 'int cudart(void); int t(void) { return cudart(); }' > t.c
      gcc -shared -fPIC -o $out/lib/libtorch_cuda.so t.c -L${cudatoolkit}/lib -l:libcudart.so.12 \
        -Wl,--enable-new-dtags,-rpath,${cudatoolkit}/lib
      echo "${d} ${nccl}" > $out/lib/refs.txt
    '' ];
  };
  nccl = sh "nccl-2.21.5-static" ''
    mkdir -p $out/lib
    yes n | head -c 300000 > $out/lib/libnccl_static.a
  '';
"""
