"""Nix knowledge: running Nix's commands (command.py) and store paths and
their names (storepath.py). Light: command.py's shutil and subprocess load
only where a Nix command runs.

What it may import: the README's architecture table.
"""
