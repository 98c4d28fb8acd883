"""Read: the machine a program is to run on. Every input is a file under a
root directory (`--root`, default /) or a command found under it, so a whole
host can be laid out in a directory and checked.

Nothing here judges. What it may import: the README's architecture table.
"""
