"""Derivations: .drv files and the graph of their inputs, what Nix builds and
fetches (the plan and its root causes), and a derivation against its like in
another tree (the setting behind a rebuild).

What it may import: the README's architecture table.
"""
