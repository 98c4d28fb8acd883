"""Nix closures: read the reference graph (nix CLI, nix-store, saved dumps),
resolve sizes, chains and the evidence behind each reference, and compare two
closures. No judge here: findings/ judges what this folder reads.

What it may import: the README's architecture table.
"""

# What a closure command (size, why, diff, gate, report) takes as a target:
# here, where the command line's help can read it without numpy.
CLOSURE_TARGETS = ("a store path, a result link, an installable (.#attr) or a saved "
                   "`nix path-info --json --recursive` dump")
