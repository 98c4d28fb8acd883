"""Nix closures: read the reference graph (nix CLI, nix-store, saved dumps),
resolve sizes, chains and the evidence behind each reference, and compare two
closures. No judge here: findings/ judges what this folder reads.

What it may import: the README's architecture table.
"""
