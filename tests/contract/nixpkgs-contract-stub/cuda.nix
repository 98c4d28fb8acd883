# CONTRACT STUB, not nixpkgs: one of nixpkgs' CUDA package sets
# (pkgs/development/cuda-modules/default.nix: a scope, overridable with
# overrideScope, of every file in ./packages) as the overlay meets it:
#
# - a member for every redistributable of the release's manifest, and for
#   every package nixpkgs has a file for but the release lacks (cuda_crt in
#   12.9): built by buildRedist (cuda-modules/buildRedist/default.nix), named
#   cuda<release>-<package>-<version>, licensed nvidiaCudaRedist, broken when
#   config.cudaSupport is off, and unavailable (meta.badPlatforms) where the
#   release has no archive for the platform;
# - cuda_nvcc (packages/cuda_nvcc.nix): one output; from CUDA 13 its
#   nvcc.profile names cuda_cccl's include output and copies libnvvm;
# - cuda_cccl (packages/cuda_cccl.nix): one output, include/cccl un-nested from 13;
# - cuda_cudart (packages/cuda_cudart.nix): out dev include lib static stubs,
#   propagating the compiler's headers (cuda_nvcc before 13, cuda_crt from
#   13) and cuda_cccl's;
# - cudatoolkit (packages/cudatoolkit.nix): a symlinkJoin of every output but
#   static of the host tools (cuobjdump, gdb, nvcc, nvdisasm, nvprune) and the
#   libraries, cuda_crt from 13: evaluating it evaluates each of them;
# - setupCudaHook (its script names backendStdenv.cc), markForCudatoolkitRootHook,
#   backendStdenv, flags (_cuda/lib formatCapabilities), nccl (from source),
#   libcusparse_lt (the cusparselt redistributable).
{
  lib,
  pkgs,
  record,
  config,
  version,
  release,
}:
let
  major = lib.versions.major version;
  atLeast = lib.versionAtLeast version;
  readJSON = path: builtins.fromJSON (builtins.readFile path);
  manifests = ../../../pkgs/cuda/manifests;
  # NVIDIA's manifests: the same files nixpkgs reads for these releases.
  cudaManifest = readJSON (manifests + "/redistrib_${release}.json");
  otherManifests = map (r: readJSON (manifests + "/redistrib_${r}.json")) [
    "12.9.1"
    "13.0.2"
  ];
  entries = m: builtins.filter (n: builtins.isAttrs m.${n} && m.${n} ? version) (builtins.attrNames m);
  # Every package file nixpkgs has: the redistributables of all its releases.
  packageNames = lib.unique (builtins.concatMap entries otherManifests);
  redistSystem =
    {
      x86_64-linux = "linux-x86_64";
      aarch64-linux = "linux-sbsa";
    }
    .${pkgs.system} or "unsupported";
  isJetson = c: builtins.elem c [ "5.3" "6.2" "7.2" "8.7" "10.1" "11.0" ];
  # _cuda's default capabilities when config.cudaCapabilities is empty.
  defaultCapabilities =
    if atLeast "13.0" then
      [ "7.5" "8.0" "8.6" "8.9" "9.0" "10.0" "10.3" "12.0" "12.1" ]
    else
      [ "5.0" "6.0" "7.0" "7.5" "8.0" "8.6" "8.9" "9.0" "10.0" "12.0" ];

  scope =
    self:
    let
      # buildRedist: a member of the manifest, or an unavailable placeholder.
      redist =
        pname:
        {
          outputs ? [
            "out"
            "bin"
            "dev"
            "include"
            "lib"
            "static"
          ],
          extra ? { },
          manifest ? cudaManifest,
          # cuDNN's manifest has an archive per CUDA major.
          variant ? null,
        }:
        let
          entry = manifest.${pname} or null;
          platformEntry = if entry == null then null else entry.${redistSystem} or null;
          archive = if platformEntry == null || variant == null then platformEntry else platformEntry.${variant} or null;
          v = if entry == null then "0-unsupported" else entry.version;
        in
        pkgs.stdenv.mkDerivation (
          {
            inherit pname;
            version = v;
            name = "${self.cudaNamePrefix}-${pname}-${v}";
            outputs = if archive == null then [ "out" ] else outputs;
            src =
              if archive == null then
                null
              else
                pkgs.fetchurl {
                  url = "https://developer.download.nvidia.com/compute/redist/${archive.relative_path}";
                  inherit (archive) sha256;
                };
            __structuredAttrs = true;
            strictDeps = true;
            nativeBuildInputs = [
              pkgs.autoPatchelfHook
              pkgs.autoAddDriverRunpath
              self.markForCudatoolkitRootHook
            ];
            propagatedBuildInputs = [ self.setupCudaHook ];
            meta = {
              license = lib.licenses.nvidiaCudaRedist;
              platforms = if archive == null then [ ] else [ pkgs.system ];
              badPlatforms = if archive == null then [ pkgs.system ] else [ ];
              # "CUDA support is enabled by config.cudaSupport"
              broken = !config.cudaSupport;
            };
          }
          // extra
        );
      include = lib.getOutput "include";
      members = lib.genAttrs packageNames (n: redist n { });
    in
    members
    // {
      cudaMajorMinorVersion = version;
      cudaMajorVersion = major;
      cudaMajorMinorPatchVersion = release;
      cudaNamePrefix = "cuda${version}";
      cudaOlder = lib.versionOlder version;
      cudaAtLeast = atLeast;
      pkgs = pkgs;
      backendStdenv = pkgs.stdenv // {
        cc = record "cc-wrapper" { name = "gcc-wrapper-14.3.0"; } { };
        hostRedistSystem = redistSystem;
        cudaCapabilities = if config.cudaCapabilities == [ ] then defaultCapabilities else config.cudaCapabilities;
        cudaForwardCompat = config.cudaForwardCompat;
        hasJetsonCudaCapability = builtins.any isJetson config.cudaCapabilities;
      };
      flags =
        let
          caps = self.backendStdenv.cudaCapabilities;
          dropDots = builtins.replaceStrings [ "." ] [ "" ];
          gencodeOf = prefix: c: "-gencode=arch=compute_${dropDots c},code=${prefix}_${dropDots c}";
        in
        {
          cudaCapabilities = caps;
          inherit (self.backendStdenv) cudaForwardCompat;
          realArches = map (c: "sm_${dropDots c}") caps;
          virtualArches = map (c: "compute_${dropDots c}") caps;
          gencode = map (gencodeOf "sm") caps ++ lib.optional self.backendStdenv.cudaForwardCompat (gencodeOf "compute" (lib.last caps));
          cmakeCudaArchitecturesString = lib.concatMapStringsSep ";" dropDots caps;
          inherit dropDots;
          isJetsonBuild = self.backendStdenv.hasJetsonCudaCapability;
        };
      setupCudaHook = pkgs.makeSetupHook {
        name = "setup-cuda-hook";
        substitutions.ccFullPath = "${self.backendStdenv.cc}/bin/c++";
      } "setup-cuda-hook.sh";
      markForCudatoolkitRootHook = pkgs.makeSetupHook { name = "mark-for-cudatoolkit-root-hook"; } "mark-for-cudatoolkit-root-hook.sh";
      autoAddCudaCompatRunpath = pkgs.makeSetupHook { name = "auto-add-cuda-compat-runpath-hook"; } "auto-add-cuda-compat-runpath.sh" // {
        enableHook = false;
      };

      cuda_nvcc = redist "cuda_nvcc" {
        outputs = [ "out" ];
        extra = {
          propagatedBuildInputs = [ self.setupCudaHook ];
          postInstall =
            lib.optionalString (atLeast "13.0") ''
              cp -r ${self.libnvvm} nvvm
              substituteInPlace bin/nvcc.profile --replace-fail '$(TOP)/$(_TARGET_DIR_)/include/cccl' '${include self.cuda_cccl}/include'
            ''
            + ''
              echo 'compiler-bindir = ${self.backendStdenv.cc}/bin' >> bin/nvcc.profile
            '';
        };
      };
      cuda_cccl = redist "cuda_cccl" {
        outputs = [ "out" ];
        extra.prePatch = lib.optionalString (atLeast "13.0") ''
          rm -rf include/nv
          mv include/cccl/* include/
          rmdir include/cccl
        '';
      };
      cuda_crt = redist "cuda_crt" { outputs = [ "out" ]; };
      cuda_cudart = redist "cuda_cudart" {
        outputs = [
          "out"
          "dev"
          "include"
          "lib"
          "static"
          "stubs"
        ];
        extra.propagatedBuildInputs = [
          (include self.cuda_nvcc)
        ]
        ++ lib.optional (atLeast "13.0") (include self.cuda_crt)
        ++ [ (include self.cuda_cccl) ];
      };
      cudnn = redist "cudnn" {
        manifest = readJSON (manifests + "/redistrib_9.27.0.json");
        variant = "cuda${major}";
      };
      # From NVIDIA's cusparselt manifest, which this repository does not
      # hold: the entry is a placeholder (its hash is made up), for availability only.
      libcusparse_lt = redist "libcusparse_lt" {
        manifest.libcusparse_lt = {
          version = "0.8.1.1";
          ${redistSystem} = {
            relative_path = "libcusparse_lt/${redistSystem}/libcusparse_lt-${redistSystem}-0.8.1.1_cuda${major}-archive.tar.xz";
            sha256 = builtins.hashString "sha256" "libcusparse_lt placeholder";
          };
        };
      };

      cudatoolkit =
        let
          getAllOutputs = p: builtins.concatMap (o: lib.optional (o != "static") p.${o}) p.outputs;
          hostPackages = with self; [
            cuda_cuobjdump
            cuda_gdb
            cuda_nvcc
            cuda_nvdisasm
            cuda_nvprune
          ];
          targetPackages =
            with self;
            [
              cuda_cccl
              cuda_cudart
              cuda_cupti
              cuda_cuxxfilt
              cuda_nvml_dev
              cuda_nvrtc
              cuda_nvtx
              cuda_profiler_api
              cuda_sanitizer_api
              libcublas
              libcufft
              libcurand
              libcusolver
              libcusparse
              libnpp
            ]
            ++ lib.optional (atLeast "13") cuda_crt;
        in
        pkgs.symlinkJoin {
          pname = "cuda-merged";
          inherit version;
          paths = builtins.concatMap getAllOutputs (hostPackages ++ targetPackages);
          meta.license = lib.licenses.nvidiaCudaRedist;
        };

      # Built from source against the scope's members.
      nccl = pkgs.stdenv.mkDerivation {
        pname = "nccl";
        version = "2.27.7-1";
        outputs = [
          "out"
          "dev"
          "static"
        ];
        buildInputs = [
          self.cuda_cudart
          self.cuda_cccl
        ];
        nativeBuildInputs = [ self.cuda_nvcc ];
        meta.broken = !config.cudaSupport;
      };
    };
in
lib.makeScope pkgs.newScope scope
