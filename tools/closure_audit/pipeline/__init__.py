"""The pipelines more than one command runs (audit's loading audit, which
doctor runs on its targets too): below ops/, so no op imports another.

What it may import: the README's architecture table.
"""
