"""Judge: the rule catalogue, the policy that sets each rule's severity, and
the judges that turn what was read and resolved into findings.

May import elf/, loader/, gpu/, host/ (the facts of a machine) and the
foundations; never closure/, output/ or commands/.
"""
