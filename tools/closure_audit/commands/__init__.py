"""One module per command: its arguments next to the function that runs it.

A command is parse → Options → run → show: it turns its arguments into its
ops/ module's Options (resolving its targets, targets.py: only commands
do), calls that module's run() and returns output.show(result), which
prints the result and gives the exit status. What a command module may
import at its top, and why: the start-up rule in cli.py, by the registry.
"""
