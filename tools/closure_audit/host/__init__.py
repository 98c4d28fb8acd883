"""Read: the machine a program is to run on. Every input is a file under a
root directory (`--root`, default /) or a command found under it, so a whole
host can be laid out in a directory and checked.

Imports elf/, gpu/ and the foundations; nothing here judges.
"""
