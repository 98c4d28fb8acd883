"""Resolve: a model of glibc's dynamic loader over ELF files read by elf/.

May import elf/ and the foundations; never findings/, closure/ or output/.
"""
