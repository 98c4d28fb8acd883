"""A closure as one self-contained HTML page (docs/commands/report.md).

The page holds one or more pictures, one per closure: a summary, a treemap of
added sizes over the dominator tree, and the forbidden paths with their
chains. The summaries and chains are written here as static HTML, so they read
without the script; the treemap, the details panel, search and zoom are the
script's (report.js beside this module), which lays out and draws only what
is visible from the data in the page. Script and style sheet are inlined: the
page loads nothing, and its Content-Security-Policy forbids loading anything.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from html import escape
from importlib.resources import files

from ..closure.graph import Closure
from ..closure.sizes import roots_closure_size
from ..cuda.redist import is_cuda_redist
from ..errors import UsageError
from ..findings.rules import ERROR, Finding
from ..nix.storepath import name_part
from ..util import format_size
from .text import printable

FORMAT = 1  # version of the data the page's script reads
LARGEST = 10  # largest added sizes named in a picture's summary
ROOTS_SHOWN = 10
HOP_HITS = 3  # evidence hits shown per hop
OTHER, CUDA, FORBIDDEN = 0, 1, 2  # colour classes
# Rectangles drawn in one view, largest first: enough for every path of a
# 10,000-path closure, few enough to draw in well under a second.
MAX_DRAWN = 12000


@dataclass(kw_only=True)
class Picture:
    """One closure, resolved and judged."""

    name: str
    closure: Closure
    closure_size: int  # of the roots together
    added: Mapping[str, int]  # every path reachable from the roots
    dominators: dict[str, str | None]  # immediate dominator; None under the roots
    findings: list[Finding] = field(default_factory=list)  # about this closure
    verdict: bool | None = None  # the gate's: passed or not; None without budgets


def gate_pictures(results, findings: list[Finding]) -> list[Picture]:
    """One picture per budget the gate checked, with its verdict."""
    return [Picture(name=r.budget.name, closure=r.closure, closure_size=r.closure_size, added=r.added,
                    dominators=r.dominators, findings=[f for f in findings if f.fields.get("target") == r.budget.name],
                    verdict=r.passed(findings))
            for r in results]


def closure_picture(closure: Closure, added: Mapping[str, int], dominators, findings: list[Finding]) -> Picture:
    """The picture of one closure judged on its own, named by its roots."""
    roots = [name_part(r) for r in closure.roots]
    name = ", ".join(roots[:3]) + (f" and {len(roots) - 3} more" if len(roots) > 3 else "")
    return Picture(name=name, closure=closure, closure_size=roots_closure_size(closure), added=added,
                   dominators=dominators, findings=findings)


def gate_page(result) -> tuple[list[Picture], str]:
    """The pictures and title of the gate's page (--html)."""
    return gate_pictures(result.results, result.findings), "closure-audit gate"


def survey_page(result) -> str:
    """survey's page, whole: a document of every job (survey_page.py)."""
    from .survey_page import survey_html

    return survey_html(result)


def report_page(result) -> tuple[list[Picture], str]:
    """The pictures and title of report's page: against its budget, or the
    closure judged on its own."""
    pictures = gate_pictures(result.gate, result.findings) if result.budget is not None else \
        [closure_picture(result.closure, result.added, result.tree, result.findings)]
    return pictures, f"closure-audit report: {pictures[0].name}"


@cache
def _asset(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


_SLASHES = re.compile(r"/(?=/)|(?<=/)/")  # a run of two or more: a URL's start


def _t(text) -> str:
    """Text for the markup: escaped, and never readable as a URL."""
    return _SLASHES.sub("&#47;", escape(printable(str(text))))


def _name(path: str) -> str:
    return name_part(path) or os.path.basename(path)


def _data(p: Picture) -> dict:
    """What the script needs, in columns indexed by path number: roots
    first, then every other path of the closure."""
    g = p.closure.graph
    order = list(dict.fromkeys([*p.closure.roots, *sorted(p.added)]))
    index = {path: i for i, path in enumerate(order)}
    forbidden = {f.file for f in p.findings if f.rule == "forbidden-path"}
    nix_closure = [int(g.nix_closure[g.index[x]]) for x in order]
    has_closure = all(c >= 0 for c in nix_closure)
    store = p.closure.store_dir + "/"
    return {
        "store": store,
        "names": [x.removeprefix(store) for x in order],
        "roots": [index[r] for r in dict.fromkeys(p.closure.roots)],
        "nar": [p.closure.nar_size(x) for x in order],
        # Nix's own figures when it gave them; otherwise the script sums a
        # path's closure when it is shown (one traversal, on demand).
        "closure": nix_closure if has_closure else None,
        "added": [p.added.get(x, 0) for x in order],
        "dom": [-1 if p.dominators.get(x) is None else index[p.dominators[x]] for x in order],
        "refs": [sorted(index[r] for r in g.references(x)) for x in order],
        "kind": [FORBIDDEN if x in forbidden else CUDA if is_cuda_redist(_name(x)) else OTHER for x in order],
    }


def _json_for_script(data) -> str:
    """JSON that cannot end its <script> element or read as a URL."""
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return _SLASHES.sub(r"\\/", text)


def _hop_html(hop: dict) -> str:
    hits = hop.get("evidence", [])
    if hop.get("evidence_unavailable"):
        return f'<span class="evidence none">evidence unavailable: {_t(hop["evidence_unavailable"])}</span>'
    if not hits:
        return ""
    items = []
    for h in hits[:HOP_HITS]:
        where = f"{h['file'] or '.'} @{h['offset']:#x}"
        entry = f" (runpath entry {h['entry']})" if h.get("entry") else ""
        items.append(f'<li><span class="kind">{_t(h["kind"])}</span> in <code>{_t(where)}</code>{_t(entry)}'
                     f'<pre>{_t(h["context"])}</pre></li>')
    more = hop.get("evidence_total", len(hits)) - len(items)
    if more > 0:
        items.append(f"<li>… {more} more</li>")
    return f'<ul class="evidence">{"".join(items)}</ul>'


def _finding_html(f: Finding) -> str:
    chain = f.fields.get("chain", [f.file])
    hops = f.fields.get("hops", [])
    steps = [f'<li><span class="name">{_t(_name(chain[0]))}</span> <code>{_t(chain[0])}</code> (root)</li>']
    for path, hop in zip(chain[1:], hops):
        steps.append(f'<li>→ <span class="name">{_t(_name(path))}</span> <code>{_t(path)}</code>'
                     f"{_hop_html(hop)}</li>")
    added = f.fields.get("added_size")
    adds = f", adding {format_size(added)}" if isinstance(added, int) else ""
    return (f'<li class="finding {_t(f.severity)}" data-forbidden="{_t(f.file)}">'
            f'<p><button type="button" class="goto" data-goto="{_t(f.file)}">{_t(_name(f.file))}</button> '
            f'is forbidden ({_t(f.fields.get("reason") or f.fields.get("pattern") or f.rule)}){_t(adds)}, '
            f'reached from the root in {len(hops)} hop{"s" * (len(hops) != 1)}:</p>'
            f'<ol class="chain">{"".join(steps)}</ol></li>')


def _roots_html(roots: list[str]) -> str:
    unique = list(dict.fromkeys(roots))
    shown = "<br>".join(f"<code>{_t(r)}</code>" for r in unique[:ROOTS_SHOWN])
    return shown + (f"<br>… {len(unique) - ROOTS_SHOWN} more" if len(unique) > ROOTS_SHOWN else "")


def _picture_html(i: int, p: Picture) -> str:
    roots = set(p.closure.roots)
    largest = sorted(((x, s) for x, s in p.added.items() if x not in roots), key=lambda t: (-t[1], t[0]))[:LARGEST]
    forbidden = [f for f in p.findings if f.rule == "forbidden-path"]
    parts = [f'<section class="picture" id="picture-{i}" data-picture="{i}">',
             f'<h2>{_t(p.name)}</h2>']
    if p.verdict is not None:
        others = [f for f in p.findings if f.rule != "forbidden-path" or f.severity == ERROR]
        lines = "".join(f'<li class="{_t(f.severity)}">{_t(f.message)}</li>' for f in others)
        parts.append(f'<div class="verdict {"pass" if p.verdict else "fail"}"><strong>gate: '
                     f'{"passed" if p.verdict else "failed"}</strong>'
                     f'{f"<ul>{lines}</ul>" if lines else ""}</div>')
    parts.append(
        '<dl class="summary">'
        f'<div><dt>closure size</dt><dd title="{p.closure_size} bytes">{format_size(p.closure_size)}</dd></div>'
        f'<div><dt>paths</dt><dd>{len(p.added):,}</dd></div>'
        f'<div><dt>forbidden paths</dt><dd>{len(forbidden)}</dd></div>'
        f'<div><dt>roots</dt><dd>{_roots_html(p.closure.roots)}</dd></div></dl>')
    if largest:
        rows = "".join(f'<li><button type="button" class="goto" data-goto="{_t(x)}">{_t(_name(x))}</button> '
                       f'<span title="{s} bytes">{format_size(s)}</span></li>' for x, s in largest)
        parts.append(f'<div class="largest"><h3>largest added sizes</h3><ol>{rows}</ol></div>')
    parts.append('<nav class="crumbs" aria-label="zoom"></nav>'
                 '<div class="treemap" role="group" aria-label="treemap of added sizes"></div>'
                 '<p class="treemap-status"></p>')
    if forbidden:
        parts.append(f'<div class="forbidden"><h3>forbidden paths ({len(forbidden)})</h3><ol>'
                     + "".join(_finding_html(f) for f in forbidden) + "</ol></div>")
    else:
        parts.append('<div class="forbidden"><h3>forbidden paths</h3><p>none</p></div>')
    parts.append("</section>")
    return "".join(parts)


def render(pictures: list[Picture], title: str, max_drawn: int = MAX_DRAWN) -> str:
    """The page, as text."""
    data = {"format": FORMAT, "maxDrawn": max_drawn, "pictures": [_data(p) for p in pictures]}
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Nothing may load: the page is whole as it is.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">",
        f"<title>{_t(title)}</title><style>{_asset('report.css')}</style></head><body>",
        f'<header id="top"><h1>{_t(title)}</h1>',
        '<input type="search" id="search" placeholder="search package names" aria-label="search package names">',
        '<span id="search-status"></span>',
        '<ul class="legend"><li class="k2">forbidden</li><li class="k1">CUDA redistributable</li>'
        '<li class="k0">other</li></ul></header>',
        '<div id="layout"><div id="pictures">', *(_picture_html(i, p) for i, p in enumerate(pictures)),
        '</div><aside id="details" aria-live="polite"><p class="hint">Click a rectangle for its details; '
        "double-click to zoom into it.</p></aside></div>",
        '<noscript><p>The treemap needs JavaScript; the summary and the forbidden paths are complete '
        "without it.</p></noscript>",
        f'<script type="application/json" id="closure-data">{_json_for_script(data)}</script>',
        f"<script>{_asset('report.js')}</script></body></html>\n",
    ])


def check_writable(path: str) -> None:
    """Fail before the work, not after it: the page's file must be writable."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise UsageError(f"cannot write the report to {path}: it is a directory")
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write the report to {path}: no directory {parent}")
    if not os.access(parent, os.W_OK) or (os.path.exists(target) and not os.access(target, os.W_OK)):
        raise UsageError(f"cannot write the report to {path}: permission denied")


def _mode(target: str) -> int:
    """The mode the file had, or what a plain open() would give it."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write(path: str, text: str) -> None:
    """Write the page whole or not at all: a file that was there stays intact
    when writing fails."""
    check_writable(path)
    target = os.path.abspath(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=os.path.dirname(target))
    except OSError as exc:
        raise UsageError(f"cannot write the report to {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, _mode(target))
        os.replace(tmp, target)
    except OSError as exc:
        os.unlink(tmp)
        raise UsageError(f"cannot write the report to {path}: {exc.strerror}") from None
