"""Nix binary caches: the HTTP transport, narinfos and their signatures, the
cache as a closure source, NARs, and the byte evidence of NARs streamed out
of a cache.

What it may import: the README's architecture table.
"""

# Requests in flight at once against a binary cache (--store): here, where the
# command line can read it without importing the HTTP client.
HTTP_CONNECTIONS = 32
