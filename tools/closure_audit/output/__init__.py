"""Report: JSON (the contract in docs/json.md), the terminal and Markdown.

Takes finished results, and never decides anything a gate depends on. What
it may import: the README's architecture table.
"""
