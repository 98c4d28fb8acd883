# PyTorch on nixcuda's split CUDA redistributables.
#
# nixpkgs' torch (pkgs/development/python-modules/torch/source), overridden so
# that, when built with CUDA:
# - every CUDA library comes from `cudaPackages`, by default the set named in
#   pkgs/cuda/releases.json (`torch`): the newest CUDA whose major nixpkgs'
#   PyTorch accepts. A set nixpkgs' PyTorch refuses (CUDA 13 at the pinned
#   revision: its brokenConditions) is an evaluation error saying so, never a
#   package forced to `broken = false`;
# - magma is linked statically (magma-cuda-static, built with the same CUDA
#   set), or left out with `withMagma = false`;
# - triton is nixpkgs' triton-cuda, built with the same CUDA set;
# - TORCH_CUDA_ARCH_LIST comes from the standardized options (lib/cuda), with
#   +PTX for the highest capability when cudaForwardCompat is on, limited to
#   what this PyTorch release builds for (capabilities.json), and an
#   evaluation error when nothing is left;
# - the C++/CUDA extension builder accepts every capability, not only the
#   ones in its built-in list (see cppExtensionPatch);
# - every library PyTorch loads at run time, dlopen'd ones included, is in
#   its runpath, and the driver's directory too (autoAddOpenGLRunpathHook);
# - the runtime outputs' closure is checked against ci/closure-budgets.toml
#   (passthru.tests.closure, a closureAuditCheck): the forbidden names and the
#   reasoned exceptions live there only; passthru.tests.archs adds its GPU code.
#
# Every other argument (cudaSupport, rocmSupport, _tritonEffective, ...) goes
# to nixpkgs' torch, so nixpkgs' torchWithCuda and torchWithoutCuda
# (`torch.override { cudaSupport = ...; }`) keep working. Without CUDA this is
# nixpkgs' torch unchanged.
{
  lib,
  config,
  torch,
  cudaPackages,
  nixcuda,
  magma-cuda-static,
  triton-cuda,
  autoAddOpenGLRunpathHook,
  closure-audit,
  closureAuditCheck,
  runCommand,
  python,
  cudaSupport ? config.cudaSupport,
  withMagma ? true,
  ...
}@args:
let
  # Arguments that are this file's own; the rest are nixpkgs' torch's.
  own = builtins.attrNames (builtins.functionArgs (import ./default.nix));
  passedOn = builtins.removeAttrs args (builtins.filter (n: n != "cudaSupport") own);

  cudaVersion = cudaPackages.cudaMajorMinorVersion;
  budgets = ../../ci/closure-budgets.toml;
  closurePolicy = (builtins.fromTOML (builtins.readFile budgets)).targets.torch;
  # The budgets file's target, less where CI finds the closure.
  checkPolicy = builtins.removeAttrs closurePolicy [ "installable" ];
  runtimeOutputs = [
    "out"
    "lib"
  ];

  table = builtins.removeAttrs (builtins.fromJSON (builtins.readFile ./capabilities.json)) [ "_comment" ];
  releases = builtins.attrNames table;
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
      table.${newest}.capabilities;

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
  # The libraries by family; the redistributable of each is the table's
  # (lib/data/cuda-libraries.json).
  dlopened = builtins.filter (p: p != null) (
    map (family: cudaPackages.${nixcuda.lib.cuda.redistOf.${family}} or null) [
      "nvrtc"
      "nvjitlink"
      "cudnn"
      "cublas"
      "cufft"
      "curand"
      "cusolver"
      "cusparse"
      "cufile"
      "cupti"
      "nvtx"
    ]
  );

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

  isMagma = d: (d.pname or "") == "magma";

  # nixpkgs' torch with its own arguments, the CUDA ones pointing at this set.
  base = torch.override (
    passedOn
    // {
      inherit cudaSupport;
    }
    // lib.optionalAttrs cudaSupport {
      inherit cudaPackages;
      autoAddDriverRunpath = autoAddOpenGLRunpathHook;
      effectiveMagma = args.effectiveMagma or (magma-cuda-static.override { inherit cudaPackages; });
      _tritonEffective = args._tritonEffective or (triton-cuda.override { inherit cudaPackages; });
    }
  );

  refusals = builtins.attrNames (base.brokenConditions or { });
  refused = throw (
    "nixcuda: nixpkgs' PyTorch ${torch.version} refuses CUDA ${cudaVersion} ("
    + builtins.concatStringsSep "; " refusals
    + "). Its brokenConditions accept the CUDA majors it was written for; nixcuda builds PyTorch with "
    + "cudaPackages_${builtins.replaceStrings [ "." ] [ "_" ] nixcuda.lib.cuda.torchCudaVersion} and never sets meta.broken = false. "
    + "Use CUDA ${cudaVersion} for PyTorch with a nixpkgs whose PyTorch accepts it."
  );

  overridden = base.overridePythonAttrs (old: {
    buildInputs = builtins.filter (d: withMagma || !(isMagma d)) (old.buildInputs or [ ]);

    # The capabilities are checked first: nixpkgs' own list is narrower and
    # would otherwise fail with a less helpful message.
    preConfigure = builtins.seq archFlags (
      (old.preConfigure or "")
      + ''
        export TORCH_CUDA_ARCH_LIST="${archFlags.torchCudaArchList}"
      ''
    );

    postPatch = (old.postPatch or "") + ''
      substituteInPlace ${cppExtensionPatch.file} \
        --replace-fail '${cppExtensionPatch.from}' '${cppExtensionPatch.to}'
    '';

    extraRunpaths = lib.unique ((old.extraRunpaths or [ ]) ++ map (p: "${lib.getLib p}/lib") dlopened);

    passthru = (old.passthru or { }) // {
      inherit withMagma cppExtensionPatch closurePolicy;
      cudaArchList = archFlags.torchCudaArchList;
      cudaCapabilities = capabilities;
      droppedCudaCapabilities = dropped;
      tests = (old.passthru.tests or { }) // {
        # closureAuditCheck (docs/nix/checks.md) of the runtime outputs (out
        # and lib; dev and cxxdev hold the compiler by design), with the
        # forbidden names, exceptions and budget of ci/closure-budgets.toml.
        closure = closureAuditCheck {
          package = overridden;
          outputs = runtimeOutputs;
          policy = checkPolicy;
          capabilities = null;
        };
        # The same, with the GPU code PyTorch's own libraries carry: built for
        # exactly the requested capabilities, nothing missing, no
        # -arch=native fallback.
        archs = closureAuditCheck {
          package = overridden;
          outputs = runtimeOutputs;
          policy = checkPolicy;
          inherit (archFlags) capabilities forwardCompat;
          name = "${overridden.name}-gpu-archs";
        };
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
if !cudaSupport then
  base
else if refusals != [ ] then
  refused
else
  overridden
