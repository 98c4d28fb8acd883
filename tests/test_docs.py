"""The documentation agrees with the code where a reader relies on it."""

from __future__ import annotations

import re

from conftest import ROOT
from closure_audit.cli import COMMANDS, build_parser
from closure_audit.findings.rules import RULES


def test_the_rules_table_matches_the_catalogue():
    rows = re.findall(r"^\| `([a-z-]+)` \| (\S+) \| (\S+) \|", (ROOT / "docs/rules.md").read_text(), re.M)
    documented = {rule: (nix, tree) for rule, nix, tree in rows}
    assert set(documented) == set(RULES)
    for rule, (nix, tree) in documented.items():
        assert (nix, tree) == (RULES[rule].nix or "—", RULES[rule].tree or "—"), rule


def test_every_rule_has_a_section():
    text = (ROOT / "docs/rules.md").read_text()
    headings = {h.strip() for line in re.findall(r"^## (.+)$", text, re.M) for h in line.split(",")}
    assert set(RULES) <= headings


def command_parsers() -> dict:
    """Each command's parser with its arguments (`closure-audit --help` lists
    the commands by their summaries alone)."""
    return {name: build_parser(name)._subparsers._group_actions[0].choices[name] for name in COMMANDS}


def test_every_command_that_prints_json_is_documented_in_the_json_contract():
    text = (ROOT / "docs/json.md").read_text()
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)
    parsers = command_parsers()
    printing = {name for name, p in parsers.items() if "--json" in p._option_string_actions}
    assert printing == set(COMMANDS) - {"report"}  # report writes a page, no JSON
    assert set(re.findall(r"^## ([a-z-]+)$", text, re.M)) >= printing


def test_the_driver_table_is_the_documented_one():
    from closure_audit.loader.libraries import DRIVER_LIBRARIES

    text = (ROOT / "docs/loader.md").read_text()
    section = text.split("## Driver libraries", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (`[^|]+`) \|", section, re.M)
    documented = [p for row in rows for p in re.findall(r"`([^`]+)`", row)]
    assert documented == list(DRIVER_LIBRARIES)


# -- every example of the command line ------------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SHELL_STOPS = {"|", ">", ">>", "2>", "&&", ";", "||"}
_INVOCATION = re.compile(r"^\s*(?:\$ )?(?:\S*/)?(?:nix run \.#closure-audit --|closure-audit)(?=\s|$)(.*)$")


def _examples(path):
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


def _until_shell(words: list[str]) -> list[str]:
    return words[:next((i for i, w in enumerate(words) if w in _SHELL_STOPS), len(words))]


def test_every_documented_command_line_parses():
    """Each `closure-audit ...` of README.md and docs/ goes through the real
    parser: its command and options exist and take the values shown
    (placeholders such as TARGET stand for any value)."""
    from closure_audit.cli import _with_command
    from closure_audit.errors import UsageError

    seen = 0
    for page in DOCS:
        for number, words, whole in _examples(page):
            argv = _until_shell(words)
            where = f"{page.relative_to(ROOT)}:{number}: closure-audit {' '.join(words)}"
            if "--help" in argv or "--version" in argv:
                continue
            if argv and re.fullmatch(r"[A-Z][A-Z_]*(\.\.\.)?", argv[0]):
                argv[0] = "./" + argv[0]  # a placeholder for a path, which exists where it is used
            try:
                argv = _with_command(argv)
                build_parser(argv[0] if argv else None).parse_args(argv)
            except UsageError as exc:
                if whole or "the following arguments are required" not in str(exc):
                    raise AssertionError(f"{where}: {exc}") from None
            seen += 1
    assert seen > 40  # the pages hold 49: none is missed by a broken pattern


def test_the_lists_of_commands_taking_an_option_are_complete():
    parsers = command_parsers()
    taking = {name for name, p in parsers.items() if "--policy" in p._option_string_actions}
    first = (ROOT / "docs/policy.md").read_text().split("\n\n", 2)[1]
    assert set(re.findall(r"`(?:closure-audit )?([a-z]+)", first.split("reads a TOML file")[0])) == taking
