"""The project's pages and the closure-audit command lines they show."""

from __future__ import annotations

import re

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_SHELL_STOPS = {"|", ">", ">>", "2>", "&&", ";", "||"}
_INVOCATION = re.compile(r"^\s*(?:\$ )?(?:\S*/)?(?:nix run \.#closure-audit --|closure-audit)(?=\s|$)(.*)$")


def examples(path):
    """(line number, argv, whole) of each closure-audit invocation of a page:
    lines of its code blocks (with continuations) and inline code spans;
    `whole` is false for the spans, which may name a command without the
    arguments it needs."""
    import shlex

    text = path.read_text()
    block = False
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line, number = lines[i], i + 1
        i += 1
        if line.lstrip().startswith("```"):
            block = not block
            continue
        if block:
            while line.endswith("\\") and i < len(lines):
                line = line[:-1] + " " + lines[i]
                i += 1
            m = _INVOCATION.match(line)
            if m:
                words = shlex.split(re.sub(r"(^|\s)#.*$", "", m.group(1)))  # `.#attr` is no comment
                yield number, words, True
            continue
        for span in re.findall(r"`(closure-audit [^`]*)`", line):
            words = shlex.split(span)[1:]
            if len(words) > 1:  # `closure-audit gate` names the command, it is no example
                yield number, words, False


def until_shell(words: list[str]) -> list[str]:
    return words[:next((i for i, w in enumerate(words) if w in _SHELL_STOPS), len(words))]
