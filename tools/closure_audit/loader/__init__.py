"""Resolve: a model of glibc's dynamic loader over ELF files read by elf/.

What it may import: the README's architecture table.
"""
