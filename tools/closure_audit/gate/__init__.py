"""The CI gate: budgets files, and the checks of every closure against its
budget and baseline (sizes and forbidden paths, judged by findings/).

What it may import: the README's architecture table.
"""
