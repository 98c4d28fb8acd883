# NVIDIA's licenses for CUDA software, as nixpkgs names them (lib.licenses and
# cuda-modules), and an allowUnfreePredicate that admits exactly those.
let
  licenses = {
    cuda = {
      shortName = "CUDA EULA";
      fullName = "CUDA Toolkit End User License Agreement (EULA)";
      url = "https://docs.nvidia.com/cuda/eula/index.html#cuda-toolkit-supplement-license-agreement";
      free = false;
      redistributable = true;
    };
    cudnn = {
      shortName = "cuDNN EULA";
      fullName = "cuDNN SUPPLEMENT TO SOFTWARE LICENSE AGREEMENT FOR NVIDIA SOFTWARE DEVELOPMENT KITS";
      url = "https://docs.nvidia.com/deeplearning/cudnn/backend/latest/reference/eula.html";
      free = false;
      redistributable = false;
    };
    cusparseLt = {
      shortName = "cuSPARSELt EULA";
      fullName = "cuSPARSELt SUPPLEMENT TO SOFTWARE LICENSE AGREEMENT FOR NVIDIA SOFTWARE DEVELOPMENT KITS";
      url = "https://docs.nvidia.com/cuda/cusparselt/license.html";
      free = false;
      redistributable = false;
    };
    cutensor = {
      shortName = "cuTENSOR EULA";
      fullName = "cuTENSOR SUPPLEMENT TO SOFTWARE LICENSE AGREEMENT FOR NVIDIA SOFTWARE DEVELOPMENT KITS";
      url = "https://docs.nvidia.com/cuda/cutensor/latest/license.html";
      free = false;
      redistributable = false;
    };
  };
  cudaShortNames = map (l: l.shortName) (builtins.attrValues licenses) ++ [
    "TensorRT EULA"
    "NVIDIA Math SDK SLA"
  ];
  isCudaLicense = license: builtins.isAttrs license && builtins.elem (license.shortName or "") cudaShortNames;
  toList = x: if builtins.isList x then x else [ x ];
in
{
  inherit licenses isCudaLicense;
  # Unfree software is allowed only when every unfree license it carries is
  # one of NVIDIA's CUDA licenses: not `allowUnfree = true`.
  allowUnfreePredicate =
    pkg: builtins.all (l: (builtins.isAttrs l && (l.free or true)) || isCudaLicense l) (toList (pkg.meta.license or [ ]));
}
