"""Nix closures: read the reference graph (nix CLI, nix-store, saved dumps),
resolve sizes, chains and the evidence behind each reference, and compare two
closures. No judge here: findings/ judges what this folder reads.

What it may import: the README's architecture table.
"""

import os

# numpy asks for huge pages for every large array (madvise), and where the
# kernel compacts memory to find them (transparent_hugepage/defrag
# "madvise", Debian's default) each fresh array stalls on it: reading a
# million-path dump spent 2 s more system time so. A user's own setting wins;
# it takes effect only where numpy is not yet imported, as in the commands.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

# What a closure command (size, why, diff, gate, report) takes as a target:
# here, where the command line's help can read it without numpy.
CLOSURE_TARGETS = ("a store path, a result link, an installable (.#attr) or a saved "
                   "`nix path-info --json --recursive` dump")
