"""The documentation agrees with the code where a reader relies on it."""

from __future__ import annotations

import re

from conftest import ROOT, run_cli
from docpages import DOCS, examples, until_shell
from nixstore import needs_nix
from closure_audit.cli import COMMANDS, build_parser
from closure_audit.findings.rules import RULES


def test_the_rules_table_matches_the_catalogue():
    rows = re.findall(r"^\| `([a-z-]+)` \| (\S+) \| (\S+) \|", (ROOT / "docs/reference/rules.md").read_text(), re.M)
    documented = {rule: (nix, tree) for rule, nix, tree in rows}
    assert set(documented) == set(RULES)
    for rule, (nix, tree) in documented.items():
        assert (nix, tree) == (RULES[rule].nix or "—", RULES[rule].tree or "—"), rule


def test_every_rule_has_a_section():
    text = (ROOT / "docs/reference/rules.md").read_text()
    headings = {h.strip() for line in re.findall(r"^## (.+)$", text, re.M) for h in line.split(",")}
    assert set(RULES) <= headings


def command_parsers() -> dict:
    """Each command's parser with its arguments (`closure-audit --help` lists
    the commands by their summaries alone)."""
    return {name: build_parser(name)._subparsers._group_actions[0].choices[name] for name in COMMANDS}


def test_every_command_that_prints_json_is_documented_in_the_json_contract():
    text = (ROOT / "docs/reference/json.md").read_text()
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)
    parsers = command_parsers()
    printing = {name for name, p in parsers.items() if "--json" in p._option_string_actions}
    assert printing == set(COMMANDS) - {"report"}  # report writes a page, no JSON
    assert set(re.findall(r"^## ([a-z-]+)$", text, re.M)) >= printing


def test_the_driver_table_is_the_documented_one():
    from closure_audit.loader.libraries import DRIVER_LIBRARIES

    text = (ROOT / "docs/internals/loader.md").read_text()
    section = text.split("## Driver libraries", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (`[^|]+`) \|", section, re.M)
    documented = [p for row in rows for p in re.findall(r"`([^`]+)`", row)]
    assert documented == list(DRIVER_LIBRARIES)


# -- every example of the command line ------------------------------------------

def test_every_documented_command_line_parses():
    """Each `closure-audit ...` of README.md and docs/ goes through the real
    parser: its command and options exist and take the values shown
    (placeholders such as TARGET stand for any value)."""
    from closure_audit.cli import _with_command
    from closure_audit.errors import UsageError

    seen = 0
    for page in DOCS:
        for number, words, whole in examples(page):
            argv = until_shell(words)
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
    first = (ROOT / "docs/reference/policy.md").read_text().split("\n\n", 2)[1]
    assert set(re.findall(r"`(?:closure-audit )?([a-z]+)", first.split("reads a TOML file")[0])) == taking


# -- a figure stated twice on a page --------------------------------------------

_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
# unit -> (kind, factor to the kind's base)
_UNITS = {"µs": ("time", 1e-6), "ms": ("time", 1e-3), "s": ("time", 1), "second": ("time", 1),
          "seconds": ("time", 1), "B": ("bytes", 1), "KB": ("bytes", 1e3), "kB": ("bytes", 1e3),
          "MB": ("bytes", 1e6), "GB": ("bytes", 1e9), "KiB": ("bytes", 2**10), "MiB": ("bytes", 2**20),
          "GiB": ("bytes", 2**30), "x": ("ratio", 1), "times": ("ratio", 1)}
_FIGURE = re.compile(_NUMBER + r"\s?(" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")(?![\w/])"
                     r"(\s(?:of\s)?CPU)?|×" + _NUMBER + r"|\bexponent " + _NUMBER + r"|" + _NUMBER + r" CPU\b")
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
_CORES = re.compile(r"\b(\d+)[ -]cores?\b")
# A sentence about another measurement than the table's whole processes: an older state, or
# one timed inside a process; a clause about a figure something is held to.
_OTHER = re.compile(r"\b(?:before|earlier|previous|used to|(?:in|inside) one process)\b", re.I)
_GOAL = re.compile(r"[^,;:()]*\b(?:targets?|limits?|budgets?)\b[^,;:()]*")


class Figure(tuple):
    """(kind, value in the kind's base unit, half a unit of the last digit
    written); the kind is a unit's (time, bytes, ratio), an exponent, or CPU
    time ("7.02 CPU", "6.94 s of CPU") apart from wall time."""


def figures(text: str) -> list[Figure]:
    out = []
    for m in _FIGURE.finditer(text):
        if m.group(1):
            number, (kind, factor) = m.group(1), _UNITS[m.group(2)]
            kind = "cpu" if m.group(3) else kind
        elif m.group(4):
            number, kind, factor = m.group(4), "ratio", 1
        elif m.group(5):
            number, kind, factor = m.group(5), "exponent", 1
        else:
            number, kind, factor = m.group(6), "cpu", 1
        decimals = len(number.split(".")[1]) if "." in number else 0
        out.append(Figure((kind, float(number.replace(",", "")) * factor, 0.5 * 10 ** -decimals * factor)))
    return out


def agrees(stated: Figure, table: list[Figure]) -> bool:
    kind, value, half = stated
    return any(k == kind and abs(v - value) <= half + 1e-9 * max(1, abs(v)) for k, v, _h in table)


def page_blocks(path):
    """(line, paragraph text) of a page's prose and (line, caption, rows) of its
    tables; code blocks are left out. A table's caption is the prose above it."""
    prose, tables, block, rows, para, start = [], [], False, [], [], 0
    for number, line in enumerate([*path.read_text().splitlines(), ""], 1):
        if line.lstrip().startswith("```"):
            block = not block
            continue
        if block:
            continue
        if line.startswith("|"):
            if para:
                prose.append((start, " ".join(para)))
                para = []
            rows.append((number, [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]))
            continue
        if rows:
            header, body = rows[0][1], [(n, r) for n, r in rows[2:]]
            tables.append((rows[0][0], prose[-1][1] if prose else "", header, body))
            rows = []
        if para and re.match(r"\s*(?:[-*]|\d+\.) ", line):  # a list item is a paragraph of its own
            prose.append((start, " ".join(para)))
            para = []
        if line.strip():
            start = start if para else number
            para.append(line.strip())
        elif para:
            prose.append((start, " ".join(para)))
            para = []
    return prose, tables


def _context(text: str) -> tuple[set, set]:
    return set(_DATE.findall(text)), set(_CORES.findall(text))


def _shown(path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def twice_stated(path) -> list[str]:
    """Where the prose of a page states a figure of a table row (the row named
    by its first cell's code, the figure by its unit) that the row does not
    hold. Prose about another measurement is left alone: an older state
    (before, earlier), a time taken inside one process, a target, or another machine (another core count, or
    an earlier date than the table's). Prose dated later than the table is
    the same measurement made again: the table must hold its figures."""
    prose, tables = page_blocks(path)
    keyed = {}
    for _line, caption, header, body in tables:
        for _n, cells in body:
            key = re.match(r"`([^`]+)`", cells[0]) if cells else None
            found = [f for c, h in zip(cells, header) for f in figures(c if h != "exponent" else
                                                                       re.sub(r"(\d+\.\d+)", r"exponent \1", c))]
            if key and found:
                keyed.setdefault(key.group(1), []).append((caption, found))
    def row_of(span: str) -> str | None:
        keys = [k for k in keyed if k == span] or [k for k in keyed if len(span) >= 8 and span in k]
        return keys[0] if len(keys) == 1 else None

    problems = []
    for line, text in prose:
        subject = []  # a sentence naming no row is about the row named last in its paragraph
        said = ""  # the paragraph so far: where and when its figures were measured
        for sentence in re.split(r"(?<=[.;])\s+(?=[A-Z`(])", text):
            said += " " + sentence
            spans = list(dict.fromkeys(re.findall(r"`([^`]+)`", sentence)))
            named = [(s, row_of(s)) for s in spans if row_of(s)]
            # A sentence naming rows of several names compares them or lists them together:
            # its figures are no one row's.
            named = named if len({key for _s, key in named}) == 1 else []
            subject = named if spans else subject
            if _OTHER.search(sentence):
                continue
            sentence = _GOAL.sub("", sentence)
            stated = figures(sentence)
            dates, cores = _context(said)
            for span, key in subject:
                rows = []  # the figures of the rows of this name measured where and when the sentence's were
                for caption, found in keyed[key]:
                    cap_dates, cap_cores = _context(caption)
                    if cores and cap_cores and not cores & cap_cores:
                        continue  # another machine
                    if dates and cap_dates and max(dates) < max(cap_dates):
                        continue  # an older run
                    rows += found
                # A kind the sentence and the rows share must agree once: of a row's
                # "503 MB", the "332 MB of it" that is GPU code is another quantity.
                for kind in sorted({f[0] for f in rows} & {f[0] for f in stated}):
                    if not any(agrees(f, rows) for f in stated if f[0] == kind):
                        problems.append(f"{_shown(path)}:{line}: `{span}`: {sentence!r} "
                                        f"states {kind} its table row does not hold")
    return problems


def test_a_figure_stated_in_a_table_and_in_the_text_agrees():
    problems = [p for page in DOCS for p in twice_stated(page)]
    assert problems == [], "\n".join(problems)


def test_the_figure_check_tells_a_stale_table_from_another_measurement(tmp_path):
    page = tmp_path / "page.md"
    table = ("Measured on 2026-11-24, 2 cores:\n\n| command | 100,000 paths | exponent |\n| --- | ---: | ---: |\n"
             "| `size --all --json` | 6.94 s (7.02 CPU), 445 MB | 1.39 |\n\n")
    stale = [  # what scale.md said once: the table and its own text disagreeing
        "`size --all --json` at 100,000 paths takes 4.91 s of wall time and 471 MB.",
        "On 2026-11-26: `size --all --json` takes 6.94 s of CPU.",
        "It grows as `size --all --json` does. It grows with exponent 1.22.",
        "With `--all --json`, it takes 15 seconds.",
    ]
    for text in stale:
        page.write_text(table + text + "\n")
        assert twice_stated(page), text
    fine = [
        "`size --all --json` takes 6.9 s (7.0 s of CPU) and 445 MB, of which 300 MB are the graph.",
        "Before the parallel passes, `size --all --json` took 9.8 s.",   # an older state
        "On 16 cores, `size --all --json` takes 1.2 s.",                # another machine
        "On 2026-11-20, `size --all --json` took 8.1 s.",               # an older run
        "`size --all --json` is under its 5 s and 2 GB targets.",       # a goal, not a measurement
        "`size` takes 2 s.",                                            # another row
    ]
    for text in fine:
        page.write_text(table + text + "\n")
        assert twice_stated(page) == [], text


# -- exit statuses ----------------------------------------------------------------

# How a command is named in an exit-status statement.
_NAMED = {"why PATTERN": r"`why [^`]*PATTERN[^`]*`", "why-build": r"`why-build`", "size": r"`size`",
          "trace": r"`trace`"}


def exit_statements(path) -> str:
    """The prose of a page that speaks of exit statuses."""
    prose, _tables = page_blocks(path)
    texts = [text for _line, text in prose]
    return " ".join(text for i, text in enumerate(texts) if re.search(r"\bexit(?:s| status| code)?\b", text, re.I)
                    or i and re.match(r"#+ Exit status", texts[i - 1]))


def run_json(*args, env=None) -> tuple[int, int]:
    """(exit status, findings of severity error) of `closure-audit ARGS --json`."""
    import json

    p = run_cli(args[0], "--json", *args[1:], env=env)  # before trace's `--`
    assert p.returncode != 2 and p.stdout, (args, p.stderr)
    return p.returncode, json.loads(p.stdout)["summary"]["findings"]["error"]


def _why_build_case(tmp_path) -> tuple[int, int]:
    """why-build of a derivation no cache has: something to build, no finding."""
    import subprocess

    expr = tmp_path / "probe.nix"
    expr.write_text('builtins.derivation { name = "docs-probe-%s"; system = builtins.currentSystem; '
                    'builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; }' % tmp_path.name)
    drv = subprocess.run(["nix-instantiate", str(expr)], capture_output=True, text=True, check=True).stdout.strip()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "nix-cache-info").write_text("StoreDir: /nix/store\n")
    return run_json("why-build", drv, "--store", f"file://{cache}")


@needs_nix
def test_the_exit_statuses_the_docs_state_are_the_commands(build, tmp_path):
    """The README and docs/reference/json.md say: 0 when no finding is an error, 1 when
    one is, and name every command that answers otherwise. Each command runs
    here on inputs where the rule could be broken: the commands whose status
    does not follow their error findings, and the closure commands that pass
    a closure `why` fails for its forbidden path, must be named there, and
    every status errors.Exit knows must be stated."""
    from synthetic import write

    from closure_audit.errors import Exit

    lib = str(build.lib("lib/libsmall.so"))
    dump = tmp_path / "dump.json"
    write(str(dump), 200)  # holds cudatoolkit, which the default policy forbids
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(f'[targets.t]\npath-info = "{dump}"\n')
    seen = {
        "audit": run_json("audit", str(build.root)),
        "archs": run_json("archs", lib, "--capabilities", "8.6"),
        "doctor": run_json("doctor", "--host-root", str(tmp_path)),
        "why": run_json("why", "--path-info", str(dump)),
        "why PATTERN": run_json("why", "--path-info", str(dump), "no-such-package"),
        "size": run_json("size", "--path-info", str(dump)),
        "diff": run_json("diff", str(dump), str(dump)),
        "gate": run_json("gate", "--budgets", str(budgets)),
        "why-build": _why_build_case(tmp_path),
        "trace": run_json("trace", "--", "/bin/sh", "-c", "exit 3"),
    }
    assert seen["why"][0] == Exit.FAILED  # the closure fails: its forbidden path is an error
    otherwise = {name for name, (status, errors) in seen.items() if status != (Exit.FAILED if errors else Exit.OK)}
    passing = {name for name, args in {"size": (), "why PATTERN": ("cudatoolkit",)}.items()
               if run_json(name.split()[0], "--path-info", str(dump), *args)[0] == Exit.OK}
    assert otherwise == {"why PATTERN", "why-build", "trace"} and passing == {"size", "why PATTERN"}  # probes work
    for page in (ROOT / "README.md", ROOT / "docs/reference/json.md"):
        said = exit_statements(page)
        for name in otherwise | passing:
            assert re.search(_NAMED[name], said), f"{page.name} does not say how `{name}` exits"
    said = exit_statements(ROOT / "README.md")
    for status in Exit:
        assert re.search(rf"\b{int(status)}\b", said), f"README.md does not state exit status {int(status)}"
    # A command's own page states the status it gave here, and 2 for bad input.
    pages = {p.stem: p for p in DOCS}
    for name, (status, _errors) in seen.items():
        if name in pages and status in set(Exit):
            said = exit_statements(pages[name])
            for n in {int(status), int(Exit.USAGE)}:
                assert re.search(rf"\b{n}\b", said), f"{pages[name].name} does not state exit status {n}"


def test_every_exit_status_the_docs_name_is_one_the_commands_give():
    """`exit status N`, `exit N`, `exits N`: N is one of errors.Exit, or
    SIGPIPE's 141 as a shell shows it."""
    from closure_audit.errors import Exit

    known = {int(s) for s in Exit} | {141}
    for page in DOCS:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for n in re.findall(r"\bexit(?:s| status| code)?(?: with)? (\d+)\b", line, re.I):
                assert int(n) in known, f"{page.relative_to(ROOT)}:{number}: exit status {n}"


def test_the_gpu_check_exits_as_doctor_md_says_without_a_gpu(tmp_path):
    """docs/commands/doctor.md's line for ci/gpu/doctor-vs-driver.py states its exit
    status without a GPU, nvidia-smi or nvcc: one line on stderr and that status,
    never a traceback nor the status of a disagreement."""
    import subprocess
    import sys

    line = next(ln for ln in (ROOT / "docs/commands/doctor.md").read_text().splitlines()
                if ln.startswith("ci/gpu/doctor-vs-driver.py"))
    documented = int(re.search(r"\b(\d) without a GPU, nvidia-smi or nvcc", line).group(1))
    script = ROOT / "ci/gpu/doctor-vs-driver.py"
    for extra, path in ((["--nvcc", str(tmp_path / "nvcc")], "/usr/bin:/bin"),  # no nvcc
                        (["--nvcc", sys.executable], str(tmp_path))):  # an nvcc, and no nvidia-smi on PATH
        p = subprocess.run([sys.executable, str(script), *extra, str(tmp_path / "work")], capture_output=True,
                           text=True, env={"PATH": path})
        assert p.returncode == documented and len(p.stderr.strip().splitlines()) == 1, (extra, p.stderr)
        assert "Traceback" not in p.stderr


def test_the_schema_title_names_its_version():
    import json

    for schema in (ROOT / "docs/reference/schema").glob("*.schema.json"):
        data = json.loads(schema.read_text())
        version = data["$id"].rsplit("/", 1)[1]
        assert data["title"].endswith(f"schema version {version}"), schema.name


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_every_link_between_pages_leads_somewhere():
    """Each relative link of the project's Markdown names a file that exists
    and, for `#anchor` into a page, one of its headings."""
    pages = [p for p in ROOT.rglob("*.md")
             if not any(part.startswith(".") or part in ("build", "node_modules") for part in p.relative_to(ROOT).parts)]
    assert len(pages) > len(DOCS)
    broken = []
    for page in pages:
        name = page.relative_to(ROOT)
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target, anchor in re.findall(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            where = (page.parent / target).resolve() if target else page
            if not where.exists():
                broken.append(f"{name}: ({target}) does not exist")
            elif anchor and where.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", where.read_text(), flags=re.S), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{name}: ({target}#{anchor}) names no heading of {where.name}")
    assert broken == [], "\n".join(broken)


def test_the_index_names_every_page():
    """docs/README.md links every page under docs/: none is found only by chance."""
    index = (ROOT / "docs/README.md").read_text()
    linked = {(ROOT / "docs" / target).resolve() for target in re.findall(r"\]\(([^)#\s]+)", index)}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix in (".md", ".json")}
    assert pages - {(ROOT / "docs/README.md").resolve()} <= linked
