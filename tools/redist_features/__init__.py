"""redist-features: which outputs an NVIDIA redistributable archive fills.

Reads a redist tarball, a wheel or an unpacked directory without unpacking
anything to disk, and reports per package which outputs (bin, lib, static,
dev, stubs, doc, samples) would be non-empty under the rules of
docs/nix/redist-features.md. pkgs/cuda/outputs/*.json are made with it.
"""

__version__ = "0.1.0"
