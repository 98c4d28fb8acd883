"""Read: the policy file (docs/reference/policy.md), loaded and checked into
findings/policy.py's Policy, which the judges take.

What it may import: the README's architecture table.
"""
