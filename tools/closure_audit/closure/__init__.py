"""Nix closures: read the reference graph (nix CLI, nix-store, saved dumps, binary caches),
resolve sizes, chains and the evidence behind each reference, compare two
closures, and check budgets.

What it may import: the README's architecture table.
"""

# Requests in flight at once against a binary cache (--store): here, where the
# command line can read it without importing the HTTP client.
HTTP_CONNECTIONS = 32
