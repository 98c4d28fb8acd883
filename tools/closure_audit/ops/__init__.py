"""One function per command that runs its pipeline, read → resolve → judge,
on an options value: no argparse, no printing. commands/ turns the command
line into the options and hands the result to output/.

What it may import: the README's architecture table.
"""
