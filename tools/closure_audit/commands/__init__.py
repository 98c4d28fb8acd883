"""One module per command: its arguments next to the function that runs it.

A command reads its inputs, calls the layers in order (read, resolve,
judge) and hands the result to output/.
"""
