# One NVIDIA redistributable: the archive the manifest names, unpacked and
# split into the outputs its output list declares (hooks/split-redist-outputs.sh),
# with runpaths to its dependencies (autoPatchelf) and to the GPU driver
# (hooks/auto-add-opengl-runpath-hook.sh).
{
  lib,
  stdenv,
  fetchurl,
  autoPatchelfHook,
  autoAddOpenGLRunpathHook,
  splitRedistOutputsHook,
  zlib,
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
  deps ? [ ],
  allowFHSReferences ? false,
}:
stdenv.mkDerivation {
  # The store name says which CUDA release a piece belongs to:
  # cuda13.0-libcublas-13.1.0.3-lib.
  pname = "cuda${cudaMajorMinorVersion}-${name}";
  inherit version;

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
  ];
  buildInputs = [
    stdenv.cc.cc.lib
    zlib
  ]
  ++ map (d: d.lib or d) deps;

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
  inherit allowFHSReferences;

  # The driver comes from the machine, through the runpath the hook adds.
  autoPatchelfIgnoreMissingDeps = [
    "libcuda.so.1"
    "libnvidia-ml.so.1"
  ];

  passthru = {
    redistName = name;
    inherit cudaMajorMinorVersion archive;
    redistOutputs = outputs;
  };

  meta = {
    inherit description license platforms;
    broken = archive != null && outputs == null;
    sourceProvenance = [ lib.sourceTypes.binaryNativeCode ];
  };
}
