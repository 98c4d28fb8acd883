"""Read: ELF files, the fat binaries inside them, and the trees that hold them.

Nothing here judges: every problem is data for the layers above. What it
may import: the README's architecture table.
"""
