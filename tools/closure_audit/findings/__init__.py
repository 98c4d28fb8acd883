"""Judge: the rule catalogue, the policy that sets each rule's severity, and
the judges that turn what was read and resolved into findings.

What it may import: the README's architecture table.
"""
