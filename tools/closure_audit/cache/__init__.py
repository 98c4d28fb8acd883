"""Nix binary caches: the HTTP transport, narinfos and their signatures, the
cache as a closure source, NARs, and the byte evidence of NARs streamed out
of a cache.

What it may import: the README's architecture table.
"""

# Requests in flight at once against a binary cache (--store): here, where the
# command line can read it without importing the HTTP client. A narinfo walk
# is bound by requests in flight times the round trip; driven from one event
# loop, 128 measured faster than 64 on a cache 20 ms away, 256 no faster
# (docs/engineering/speed.md).
HTTP_CONNECTIONS = 128
