"""Read: ELF files, the fat binaries inside them, and the trees that hold them.

Imports only the foundations (errors, paths, storepath, targets, units) and
gpu/ for the names of GPU code. Nothing here judges: every problem is data
for the layers above.
"""
