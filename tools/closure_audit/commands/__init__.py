"""One module per command: its arguments next to the function that runs it.

A command turns its arguments into its ops/ module's options, calls that
module's run() and hands the result to output/. What a command module may
import at its top, and why: the start-up rule in cli.py, by the registry.
"""
