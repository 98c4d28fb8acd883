# Compiler flags derived from the CUDA options.
#
# With forward compatibility, PTX is embedded for the highest capability, so
# the build also runs (JIT-compiled) on GPUs newer than any listed. nixpkgs
# takes the last capability as listed, so [ "9.0" "8.6" ] silently ships PTX for
# 8.6; here the list is sorted first. Architecture- and family-specific
# capabilities (9.0a, 10.0f) never get PTX of their own: their code is not
# meant for other GPUs, so the PTX is that of their baseline (9.0, 10.0).
{ capabilities, options }:
let
  inherit (capabilities) parse isJetson archName;
  join = builtins.concatStringsSep;
  unique = builtins.foldl' (acc: x: if builtins.elem x acc then acc else acc ++ [ x ]) [ ];
  last = list: builtins.elemAt list (builtins.length list - 1);
  code = c: (parse c).code;
in
args@{
  capabilities ? [ ],
  forwardCompat ? true,
  cudaVersion,
  system ? null,
}:
let
  caps = options.resolve args;
  ptx = if forwardCompat && caps != [ ] then (parse (last caps)).base else null;
  ptxCode = code ptx;
  real = map (c: "sm_${code c}") caps;
in
{
  capabilities = caps;
  inherit forwardCompat cudaVersion;
  ptxCapability = ptx;
  realArchs = real;
  virtualArchs = unique (map (c: "compute_${code c}") caps ++ (if ptx != null then [ "compute_${ptxCode}" ] else [ ]));
  gencode =
    map (c: "-gencode=arch=compute_${code c},code=sm_${code c}") caps
    ++ (if ptx != null then [ "-gencode=arch=compute_${ptxCode},code=compute_${ptxCode}" ] else [ ]);
  cmakeCudaArchitectures = join ";" (
    map (c: "${code c}-real") caps ++ (if ptx != null then [ "${ptxCode}-virtual" ] else [ ])
  );
  # PyTorch's syntax: "8.6;9.0+PTX". TORCH_CUDA_ARCH_LIST cannot ask for PTX
  # alone, so when the highest capability is a variant (9.0a) its baseline is
  # added as "9.0+PTX", which also builds sm_90 code.
  torchCudaArchList = join ";" (
    if ptx == null then
      caps
    else if builtins.elem ptx caps then
      map (c: if c == ptx then "${c}+PTX" else c) caps
    else
      caps ++ [ "${ptx}+PTX" ]
  );
  archNames = unique (map archName caps);
  isJetson = caps != [ ] && isJetson (builtins.head caps);
}
