# PyTorch on nixcuda's split CUDA redistributables.
#
# nixpkgs' torch, overridden so that:
# - every CUDA library comes from `cudaPackages` (nixcuda's split set): `lib`
#   outputs at run time, `dev` and `static` only at build time;
# - magma is linked statically (magma-cuda-static), or left out with
#   `withMagma = false`; no magma shared library is in the closure;
# - TORCH_CUDA_ARCH_LIST comes from the standardized options (lib/cuda), with
#   +PTX for the highest capability when cudaForwardCompat is on, limited to
#   what this PyTorch release builds for (capabilities.json), and an
#   evaluation error when nothing is left;
# - the C++/CUDA extension builder accepts every capability, not only the
#   ones in its built-in list (see cppExtensionPatch);
# - Nix refuses the build if the monolithic toolkit, magma's shared library,
#   the CUDA compiler or a compiler wrapper is in any output's closure;
# - every library PyTorch loads at run time, dlopen'd ones included, is in
#   its runpath, and the driver's directory too (autoAddOpenGLRunpathHook).
{
  lib,
  torch,
  cudaPackages,
  nixcuda,
  stdenv,
  magma,
  magma-cuda-static,
  autoAddOpenGLRunpathHook,
  closure-audit,
  closureInfo,
  runCommand,
  python,
  withMagma ? true,
}:
let
  cudaVersion = cudaPackages.cudaMajorMinorVersion;
  table = builtins.fromJSON (builtins.readFile ./capabilities.json);
  releases = builtins.filter (v: builtins.match "[0-9]+\\.[0-9]+" v != null) (builtins.attrNames table);
  torchRelease = lib.versions.majorMinor torch.version;
  # This release's list, or that of the newest listed release older than it.
  supported =
    let
      older = builtins.filter (v: builtins.compareVersions v torchRelease <= 0) releases;
      newest = builtins.foldl' (a: b: if builtins.compareVersions a b >= 0 then a else b) (builtins.head older) older;
    in
    if older == [ ] then
      throw "nixcuda: no CUDA capability list for PyTorch ${torchRelease} (pkgs/torch/capabilities.json)"
    else
      table.${newest};

  requested = cudaPackages.flags.capabilities;
  capabilities = builtins.filter (c: builtins.elem c supported) requested;
  dropped = builtins.filter (c: !builtins.elem c supported) requested;
  archFlags =
    lib.warnIf (dropped != [ ] && capabilities != [ ])
      "nixcuda: PyTorch ${torch.version} cannot build for ${builtins.concatStringsSep ", " dropped}; building for ${builtins.concatStringsSep ", " capabilities}"
      (
    if capabilities == [ ] then
      throw (
        "nixcuda: PyTorch ${torch.version} builds for none of the requested CUDA capabilities ("
        + builtins.concatStringsSep ", " requested
        + "); it builds for "
        + builtins.concatStringsSep ", " supported
      )
    else
      nixcuda.lib.cuda.flags {
        inherit capabilities cudaVersion;
        forwardCompat = nixcuda.cudaForwardCompat;
      }
      );

  # Loaded with dlopen by PyTorch or by the libraries it links (NVRTC loads
  # its builtins, cuDNN its engines): none of them is a DT_NEEDED entry that
  # autoPatchelf would see.
  dlopened = builtins.filter (p: p != null) (
    map (n: cudaPackages.${n} or null) [
      "cuda_nvrtc"
      "libnvjitlink"
      "cudnn"
      "libcublas"
      "libcufft"
      "libcurand"
      "libcusolver"
      "libcusparse"
      "libcufile"
      "cuda_cupti"
      "cuda_nvtx"
    ]
  );

  # What the runtime closure must never hold.
  disallowed =
    builtins.filter (p: p != null) [
      (cudaPackages.cudatoolkit or null)
      (cudaPackages.cuda_nvcc or null)
      stdenv.cc
      (cudaPackages.backendStdenv.cc or null)
    ]
    ++ [ (lib.getLib magma) ];

  # PyTorch's extension builder refuses any TORCH_CUDA_ARCH_LIST entry outside
  # its built-in list (torch/utils/cpp_extension.py, _get_cuda_arch_flags), so
  # it cannot build for 10.0f, or for a GPU newer than the release. Every
  # MAJOR.MINOR[a|f][+PTX] is accepted instead; the flags it makes from them
  # are the ones nvcc takes.
  cppExtensionPatch = {
    file = "torch/utils/cpp_extension.py";
    from = "if arch not in valid_arch_strings:";
    to = ''if re.fullmatch(r"[0-9]+\.[0-9]+[af]?(\+PTX)?", arch) is None:'';
  };

  isMagma = d: lib.hasPrefix "magma" (d.pname or d.name or "");
  isNvcc = d: d == (cudaPackages.cuda_nvcc or null);

  overridden =
    (torch.override (
      {
        cudaSupport = true;
        inherit cudaPackages;
        autoAddDriverRunpath = autoAddOpenGLRunpathHook;
      }
      // lib.optionalAttrs withMagma { effectiveMagma = magma-cuda-static; }
    )).overridePythonAttrs
      (old: {
        # nvcc runs at build time (nativeBuildInputs); as a build input its
        # path would be propagated to consumers and end up in the closure.
        # CUDA 13 keeps the crt headers PyTorch includes in cuda_crt.
        buildInputs =
          builtins.filter (d: !(isNvcc d) && (withMagma || !(isMagma d))) (old.buildInputs or [ ])
          ++ builtins.filter (p: p != null) [ (cudaPackages.cuda_crt or null) ];

        preConfigure = (old.preConfigure or "") + ''
          export TORCH_CUDA_ARCH_LIST="${archFlags.torchCudaArchList}"
        '';

        postPatch = (old.postPatch or "") + ''
          substituteInPlace ${cppExtensionPatch.file} \
            --replace-fail '${cppExtensionPatch.from}' '${cppExtensionPatch.to}'
        '';

        extraRunpaths = lib.unique ((old.extraRunpaths or [ ]) ++ map (p: "${lib.getLib p}/lib") dlopened);

        disallowedRequisites = (old.disallowedRequisites or [ ]) ++ disallowed;

        passthru = (old.passthru or { }) // {
          inherit withMagma cppExtensionPatch;
          cudaArchList = archFlags.torchCudaArchList;
          cudaCapabilities = capabilities;
          droppedCudaCapabilities = dropped;
          tests = (old.passthru.tests or { }) // {
            # closure-audit's gate on the runtime closure (ci/closure-budgets.toml).
            closure = runCommand "torch-closure-gate" {
              nativeBuildInputs = [ closure-audit ];
              closure = closureInfo { rootPaths = [ overridden ]; };
              budgets = ../../ci/closure-budgets.toml;
            } ''
              mkdir -p $out
              closure-audit gate --budgets $budgets --path-info torch=$closure/registration \
                --markdown $out/summary.md --json > $out/report.json
            '';
            # The GPU code PyTorch's own libraries carry: built for exactly the
            # requested capabilities, nothing missing, no -arch=native fallback.
            archs = runCommand "torch-gpu-archs" {
              nativeBuildInputs = [ closure-audit ];
              torch = overridden;
              capabilities = builtins.concatStringsSep "," archFlags.capabilities;
              forwardCompat = if archFlags.forwardCompat then "--forward-compat" else "--no-forward-compat";
            } ''
              mkdir -p $out
              status=0
              closure-audit archs $torch --capabilities $capabilities $forwardCompat --json > $out/report.json || status=$?
              closure-audit archs $torch --capabilities $capabilities $forwardCompat | tee $out/report.txt || true
              exit $status
            '';
          };
          # Runs on a machine with a GPU: a builder with the "cuda" system feature.
          gpuCheck = runCommand "torch-gpu-check" {
            nativeBuildInputs = [ (python.withPackages (_: [ overridden ])) ];
            requiredSystemFeatures = [ "cuda" ];
            pythonPath = "${closure-audit}/${python.sitePackages}";
          } ''
            PYTHONPATH=$pythonPath python ${./gpu-check.py} | tee $out
          '';
        };
      });
in
overridden
