"""GPU code objects, CUDA capabilities and what runs where: NVIDIA's rules as
data (lib/data/cuda-capabilities.json)."""
