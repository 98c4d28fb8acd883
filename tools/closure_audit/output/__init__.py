"""Report: JSON (the contract in docs/json.md), the terminal and Markdown.

Takes finished results; may import every layer below for their types, and
never decides anything a gate depends on.
"""
