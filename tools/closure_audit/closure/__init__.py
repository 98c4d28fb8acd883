"""Nix closures: read the reference graph (nix CLI, nix-store, saved dumps),
resolve sizes, chains and the evidence behind each reference, compare two
closures, and check budgets.

May import elf/, loader/, findings/ (rules, policy, the Findings collector)
and the foundations; never output/ or commands/.
"""
