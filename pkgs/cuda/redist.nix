# One NVIDIA redistributable: the archive the manifest names, unpacked and
# split into the outputs its output list declares (hooks/split-redist-outputs.sh),
# with runpaths to its dependencies (autoPatchelf) and to the GPU driver
# (hooks/auto-add-opengl-runpath-hook.sh). Named as nixpkgs' CUDA packages are
# (pkgs/development/cuda-modules/buildRedist: pname is the package, the store
# name carries the CUDA release), and marked for CUDAToolkit_ROOT by nixpkgs'
# markForCudatoolkitRootHook where the set extends nixpkgs' scope, so nixpkgs'
# setup-cuda-hook finds it as it finds its own members.
{
  lib,
  stdenv,
  fetchurl,
  autoPatchelfHook,
  autoAddOpenGLRunpathHook,
  splitRedistOutputsHook,
  zlib,
  markForCudatoolkitRootHook ? null,
  cudaMajorMinorVersion,
  name,
  version,
  archive, # the manifest's entry for this platform: { relative_path, sha256, ... }, or null
  baseUrl,
  outputs, # from pkgs/cuda/outputs; null when not inspected for this platform
  strict, # the output list came from the archive itself
  platforms, # the Nix systems the manifest has an archive for
  license,
  description,
}:
let
  has = output: outputs != null && builtins.elem output outputs;
in
stdenv.mkDerivation (finalAttrs: {
  pname = name;
  inherit version;
  # The store name says which CUDA release a piece belongs to:
  # cuda13.0-libcublas-13.1.0.3-lib.
  name = "cuda${cudaMajorMinorVersion}-${name}-${version}";

  src =
    if archive != null then
      fetchurl {
        url = "${baseUrl}/${archive.relative_path}";
        inherit (archive) sha256;
      }
    else
      throw "cuda${cudaMajorMinorVersion}-${name}: NVIDIA has no archive of it for ${stdenv.hostPlatform.system}";

  # Without an output list (meta.broken) there is nothing to split into.
  outputs = [ "out" ] ++ (if outputs != null then outputs else [ ]);

  nativeBuildInputs = [
    autoPatchelfHook
    autoAddOpenGLRunpathHook
    splitRedistOutputsHook
  ]
  ++ lib.optional (markForCudatoolkitRootHook != null) markForCudatoolkitRootHook;
  buildInputs = [
    (lib.getLib stdenv.cc.cc)
    zlib
  ];
  strictDeps = true;

  dontConfigure = true;
  dontBuild = true;
  installPhase = ''
    runHook preInstall
    mkdir -p "$out"
    cp -a . "$out/"
    runHook postInstall
  '';

  # The split hook writes nix-support itself: dev propagates lib and bin, out
  # propagates dev. stdenv's own propagation would add static and stubs.
  propagatedBuildOutputs = [ ];
  splitRedistStrict = strict;
  allowFHSReferences = false;

  # The driver comes from the machine, through the runpath the hook adds.
  autoPatchelfIgnoreMissingDeps = [
    "libcuda.so.1"
    "libnvidia-ml.so.1"
  ];

  passthru = {
    redistName = name;
    # Read by meta.broken: each failed assertion is a reason, printed as a
    # warning when the package is evaluated, as cuda-modules' buildRedist does.
    brokenAssertions = [
      {
        message = "an output list exists for ${name} on this platform (pkgs/cuda/outputs; redist-features makes it)";
        assertion = archive == null || outputs != null;
      }
    ];
    inherit cudaMajorMinorVersion archive;
    redistOutputs = outputs;
  }
  # nixpkgs reads headers with `lib.getOutput "include"` (cuda_nvcc's
  # nvcc.profile for cuda_cccl, cuda_cudart for the compiler's headers):
  # here they are in dev.
  // lib.optionalAttrs (has "dev") { include = finalAttrs.finalPackage.dev; };

  meta = {
    inherit description license platforms;
    broken =
      let
        failed = map (a: a.message) (
          builtins.filter (a: !a.assertion) finalAttrs.passthru.brokenAssertions
        );
      in
      lib.warnIf (failed != [ ])
        "${finalAttrs.name} is marked broken: ${lib.concatStringsSep "; " failed}"
        (failed != [ ]);
    sourceProvenance = [ lib.sourceTypes.binaryNativeCode ];
  };
}
# The split runs before stdenv's multiple-outputs moves (preFixup): these keep
# the manual pages and info where the split put them.
// lib.optionalAttrs (has "doc") {
  outputMan = "doc";
  outputInfo = "doc";
  outputDevman = "doc";
  outputDevdoc = "doc";
})
