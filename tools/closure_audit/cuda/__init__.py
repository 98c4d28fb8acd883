"""CUDA knowledge: GPU code objects, capabilities and what runs where, GPU
models and driver minimums (NVIDIA's rules as data,
lib/data/cuda-capabilities.json), NVIDIA's redistributables by store name
(redist.py), and the tables shared with the Nix library (data.py).

What it may import: the README's architecture table.
"""
