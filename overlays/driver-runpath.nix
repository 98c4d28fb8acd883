# Opt-in: nixpkgs' autoAddDriverRunpath replaced by autoAddOpenGLRunpathHook
# for every package. Every derivation that has autoAddDriverRunpath among its
# inputs (each CUDA redistributable of nixpkgs, and every package built with
# CUDA) gets a new store path and is rebuilt, none of it comes from
# cache.nixos.org or NVIDIA's binary caches; docs/nix/cuda-packages.md says what
# that costs. Not part of overlays.default; builds on overlays/hooks.nix
# (overlays/default.nix applies it first).
final: prev: {
  autoAddDriverRunpath = final.autoAddOpenGLRunpathHook;
}
