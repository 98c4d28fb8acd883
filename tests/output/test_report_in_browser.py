"""The report page in headless Chromium, checked by interaction: areas
against added sizes, nesting against the dominator tree, labels, colours,
details on click, search, zoom and breadcrumbs, the console and the network.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from browser import ActionChains, By, Keys, needs_browser
from closure_audit.closure.sizes import closure_sizes
from closure_audit.findings.rules import Finding
from closure_audit.output import html
from closure_audit.nix.storepath import HASH_LEN, name_part
from closure_audit.util import format_size
from reportdata import TORCH_ENV, closure_of, picture, shape_picture, store_path, synthetic_closure

pytestmark = needs_browser
ROOT = Path(__file__).resolve().parents[2]

# Every drawn rectangle with its box, its nearest drawn ancestor, its
# label (a group's band, or the name and size in a rectangle) and its style;
# with `own: true`, a group's slice of its own bytes instead.
RECTS = """
const box = document.querySelector(arguments[0] + ' .treemap');
const inner = box.getBoundingClientRect();
return Array.from(box.querySelectorAll(arguments[1] ? '.own' : '[data-path]'), e => {
  const r = e.getBoundingClientRect(), up = e.parentElement.closest('[data-path]');
  const label = Array.from(e.children).find(c => c.classList.contains('label'));
  const small = label && label.querySelector('small');
  return {path: e.dataset.path, added: +(e.dataset.addedSize || e.dataset.ownSize),
          x: r.left - inner.left - box.clientLeft, y: r.top - inner.top - box.clientTop, w: r.width, h: r.height,
          parent: arguments[1] ? e.parentElement.dataset.path : up ? up.dataset.path : null,
          match: e.hasAttribute('data-match'), selected: e.hasAttribute('data-selected'),
          label: label ? label.firstChild.textContent : null, shown: small ? small.textContent : null,
          band: label && label.classList.contains('band') ? label.getBoundingClientRect().height : 0,
          background: getComputedStyle(e).backgroundColor, kind: e.className.split(' ')[0]};
});
"""
SIZE = "const b = document.querySelector(arguments[0] + ' .treemap'); return [b.clientWidth, b.clientHeight];"


def _page(tmp_path, pictures, name="report.html", **options):
    out = tmp_path / name
    html.write(str(out), html.render(pictures, "closure-audit report", **options))
    return out


def _in_proportion(browser, sizes: dict[str, int], top_size: int) -> tuple[list[dict], int]:
    """Check the nesting and the areas of the drawn view against `sizes`
    (added sizes; `top_size` is what the whole box stands for): every
    rectangle and own slice lies inside its group, below the group's band;
    a group's band names it with its added size; inside a group, its own
    slice and its children share the room below the band in proportion to
    their sizes (own + children = the group's added size), so each
    rectangle's area is in proportion to the size its label shows. Returns
    the rectangles and how many were checked by area."""
    rects = browser.js(RECTS, "#picture-0", False)
    owns = browser.js(RECTS, "#picture-0", True)
    W, H = browser.js(SIZE, "#picture-0")
    by_path = {r["path"]: r for r in rects}
    whole = {"x": 0, "y": 0, "w": W, "h": H, "band": 0, "added": top_size}
    checked, eps = 0, 0.05
    for r in rects + owns:
        group = by_path[r["parent"]] if r["parent"] else whole
        if "own" not in r["kind"] and r["path"] is not None:
            assert r["added"] == sizes[r["path"]]
        top = group["y"] + group["band"]
        assert group["x"] - eps <= r["x"] and r["x"] + r["w"] <= group["x"] + group["w"] + eps
        assert top - eps <= r["y"] and r["y"] + r["h"] <= group["y"] + group["h"] + eps
        expected = group["w"] * (group["h"] - group["band"]) * r["added"] / group["added"]
        if expected >= 50:  # a rectangle one can see
            checked += 1
            assert r["w"] * r["h"] == pytest.approx(expected, rel=0.01), (r["path"], r["parent"])
        if r["band"]:
            assert r["band"] == pytest.approx(14) and r["label"] == f"{name_part(r['path'])} · {format_size(r['added'])}"
        if r["shown"] is not None:
            assert r["shown"] == format_size(r["added"])
    for o in owns:  # the group's own bytes: its NAR size
        assert o["label"] in (None, "own files")
    return rects, checked


def _errors(browser):
    return [m for m in browser.console() if m["level"] in ("SEVERE", "WARNING")]


@pytest.fixture
def shape(tmp_path, browser):
    p = shape_picture()
    browser.open(_page(tmp_path, [p]))
    return p


def test_every_path_is_one_rectangle_with_area_in_proportion_inside_its_dominator(browser, shape):
    rects, checked = _in_proportion(browser, shape.added, shape.closure_size)
    by_path = {r["path"]: r for r in rects}
    assert len(by_path) == len(rects)  # one element per path
    assert set(by_path) == {x for x, s in shape.added.items() if s > 0}
    for r in rects:
        assert r["parent"] == shape.dominators[r["path"]]  # drawn inside its immediate dominator's rectangle
    assert checked >= 8
    # torch dominates most of the closure: it is a group, its band above its
    # own files and the paths it dominates, never a label on its own slice.
    torch = by_path[store_path("torch-2.9.0-lib")]
    assert torch["band"] and torch["label"] == f"torch-2.9.0-lib · {format_size(torch['added'])}"
    owns = {o["parent"]: o for o in browser.js(RECTS, "#picture-0", True)}
    assert owns[torch["path"]]["added"] == shape.closure.nar_size(torch["path"])
    groups = {d for d in shape.dominators.values() if d is not None}
    assert {r["path"] for r in rects if r["band"]} == groups
    assert _errors(browser) == []


def test_labels_name_packages_and_colours_mark_forbidden_and_cuda(browser, shape):
    rects = {name_part(r["path"]): r for r in browser.js(RECTS, "#picture-0")}
    labels = [r["label"] for r in rects.values() if r["label"]]
    assert "torch-2.9.0-lib · 854.0 MiB" in labels or "torch-2.9.0-lib" in labels
    for name in ("cuda13.0-libcublas-13.1.0.3-lib", "magma-2.7.2", "glibc-2.40-66", "python3-3.12.10"):
        assert rects[name]["label"].split(" · ")[0] == name  # big enough to be labelled
    for label in labels:
        assert not re.search(rf"[0-9a-z]{{{HASH_LEN}}}", label)  # never a hash
    kinds = {n: r["kind"] for n, r in rects.items()}
    assert kinds["magma-2.7.2"] == "k2"
    assert kinds["cuda13.0-libcublas-13.1.0.3-lib"] == kinds["cuda13.0-cuda_cudart-13.0.96-lib"] == "k1"
    assert {kinds[n] for n in ("glibc-2.40-66", "torch-2.9.0-lib", "zlib-1.3.1", "app-1.0")} == {"k0"}

    def rgb(name):
        return [int(c) for c in re.findall(r"\d+", rects[name]["background"])[:3]]

    red, green, grey = rgb("magma-2.7.2"), rgb("cuda13.0-libcublas-13.1.0.3-lib"), rgb("glibc-2.40-66")
    assert red[0] > red[1] + 60 and red[0] > red[2] + 60
    assert green[1] > green[0] and green[1] > green[2] + 40
    assert max(grey) - min(grey) < 40


def _click(browser, path: str) -> None:
    """A real click on the visible part of a rectangle (not on a child)."""
    el = browser.driver.find_element(By.CSS_SELECTOR, f'.treemap [data-path="{path}"]')
    x, y = browser.js("""
      const e = arguments[0], r = e.getBoundingClientRect();
      for (let i = 1; i < 40; i++) for (let j = 1; j < 40; j++) {
        const x = r.left + r.width * i / 40, y = r.top + r.height * j / 40;
        const hit = document.elementFromPoint(x, y);
        if (hit && hit.closest('[data-path]') === e) return [x - r.left - r.width / 2, y - r.top - r.height / 2];
      }
      return null;""", el)
    ActionChains(browser.driver).move_to_element_with_offset(el, int(x), int(y)).click().perform()


def test_a_click_shows_the_details_of_a_path(browser, shape):
    openssl = store_path("openssl-3.4.1")
    _click(browser, openssl)
    details = browser.driver.find_element(By.ID, "details").text
    c = shape.closure
    (closure,) = closure_sizes(c, np.array([c.graph.index[openssl]])).tolist()
    assert openssl in details
    assert f"NAR size\n{format_size(6 << 20)}" in details
    assert f"closure size\n{format_size(closure)}" in details and closure == (6 << 20) + (30 << 20)
    assert f"added size\n{format_size(shape.added[openssl])}" in details
    assert "referrers (1)\npython3-3.12.10" in details
    [r] = [r for r in browser.js(RECTS, "#picture-0") if r["selected"]]
    assert r["path"] == openssl

    glibc = store_path("glibc-2.40-66")
    _click(browser, glibc)
    details = browser.driver.find_element(By.ID, "details").text
    referrers = sorted(name_part(p) for p in shape.closure.graph.referrers(glibc))
    assert f"referrers ({len(referrers)})\n" + "\n".join(sorted(referrers)) in details
    # a referrer is a link: it selects that path
    browser.driver.find_element(By.XPATH, '//*[@id="details"]//button[text()="libgfortran-13.2.0-lib"]').click()
    assert store_path("libgfortran-13.2.0-lib") in browser.driver.find_element(By.ID, "details").text
    assert _errors(browser) == []


def test_search_marks_the_matching_rectangles_and_no_others(browser, shape):
    box = browser.driver.find_element(By.CSS_SELECTOR, "input[type=search]")
    for text in ("cuda", "GLIBC", "-lib", "1.3", "no such package"):
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(text)
        marked = {r["path"] for r in browser.js(RECTS, "#picture-0") if r["match"]}
        assert marked == {p for p in shape.added if text.lower() in name_part(p).lower()}, text
    assert browser.driver.find_element(By.ID, "search-status").text == "0 paths match"
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    assert not any(r["match"] for r in browser.js(RECTS, "#picture-0"))
    assert _errors(browser) == []


def test_zoom_into_a_path_and_back_with_the_breadcrumbs(browser, shape):
    torch = store_path("torch-2.9.0-lib")
    browser.driver.find_element(By.CSS_SELECTOR, f'.largest [data-goto="{torch}"]').click()
    browser.driver.find_element(By.CSS_SELECTOR, "#details button.zoom").click()
    rects, _ = _in_proportion(browser, shape.added, shape.added[torch])  # against the zoomed path's size now
    W, H = browser.js(SIZE, "#picture-0")
    inside = {p for p, d in shape.dominators.items() if _under(shape.dominators, p, torch)}
    assert {r["path"] for r in rects} == inside | {torch}
    [top] = [r for r in rects if r["path"] == torch]
    assert (top["x"], top["y"], top["w"], top["h"]) == pytest.approx((0, 0, W, H), abs=0.05)
    crumbs = browser.driver.find_element(By.CSS_SELECTOR, "#picture-0 .crumbs")
    assert crumbs.text == "whole closure › app-1.0 › torch-2.9.0-lib"

    # double-click a path without children: it fills the view alone
    magma = store_path("magma-2.7.2")
    gfortran = store_path("libgfortran-13.2.0-lib")
    el = browser.driver.find_element(By.CSS_SELECTOR, f'.treemap [data-path="{gfortran}"]')
    ActionChains(browser.driver).double_click(el).perform()
    assert [r["path"] for r in browser.js(RECTS, "#picture-0")] == [gfortran]
    assert crumbs.text == "whole closure › app-1.0 › torch-2.9.0-lib › magma-2.7.2 › libgfortran-13.2.0-lib"

    crumbs.find_element(By.XPATH, './/button[text()="magma-2.7.2"]').click()
    assert {r["path"] for r in browser.js(RECTS, "#picture-0")} == {magma, gfortran}
    crumbs.find_element(By.XPATH, './/button[text()="whole closure"]').click()
    assert len(browser.js(RECTS, "#picture-0")) == len(shape.added)
    assert _errors(browser) == []


def _under(dominators, path, ancestor) -> bool:
    while path is not None:
        path = dominators[path]
        if path == ancestor:
            return True
    return False


def test_forbidden_chains_are_listed_and_lead_to_their_rectangle(browser, shape):
    [item] = browser.driver.find_elements(By.CSS_SELECTOR, "[data-forbidden]")
    magma = store_path("magma-2.7.2")
    assert item.get_attribute("data-forbidden") == magma
    [finding] = [f for f in shape.findings if f.rule == "forbidden-path"]
    for hop in finding.fields["chain"]:
        assert name_part(hop) in item.text and hop in item.text
    item.find_element(By.CSS_SELECTOR, "button.goto").click()
    assert magma in browser.driver.find_element(By.ID, "details").text
    assert "forbidden" in browser.driver.find_element(By.ID, "details").text
    assert _errors(browser) == []


def test_the_page_makes_no_request_and_logs_no_error(browser, shape):
    """Loaded, clicked, searched and zoomed with the network blocked: the page
    asked for nothing but itself."""
    _click(browser, store_path("zlib-1.3.1"))
    box = browser.driver.find_element(By.CSS_SELECTOR, "input[type=search]")
    box.send_keys("torch")
    browser.driver.find_element(By.CSS_SELECTOR, "#details button, .largest button").click()
    browser.driver.set_window_size(1100, 900)  # a redraw
    browser.js("return new Promise(r => setTimeout(r, 400))")
    assert browser.requests() == [browser.url]
    assert browser.console() == []


def test_a_gate_page_holds_one_picture_per_target_with_its_verdict(tmp_path, browser):
    small = shape_picture()
    failing = Finding("closure-budget", "error", "app: closure is 932.1 MiB, over its budget of 500.0 MiB",
                      small.closure.roots[0], {"target": "torch"})
    pictures = [shape_picture(name="torch", verdict=False, extra=[failing]),
                picture(synthetic_closure(300, seed=3), name="synthetic", verdict=True)]
    browser.open(_page(tmp_path, pictures))
    verdicts = browser.driver.find_elements(By.CSS_SELECTOR, ".verdict")
    assert [v.text.splitlines()[0] for v in verdicts] == ["gate: failed", "gate: passed"]
    assert failing.message in verdicts[0].text
    assert len(browser.js(RECTS, "#picture-0")) == 10 and len(browser.js(RECTS, "#picture-1")) == 300
    box = browser.driver.find_element(By.CSS_SELECTOR, "input[type=search]")
    box.send_keys("glibc")
    counts = [sum(r["match"] for r in browser.js(RECTS, f"#picture-{i}")) for i in (0, 1)]
    assert counts == [1, 1]  # the synthetic closure has a glibc too
    assert browser.driver.find_element(By.ID, "search-status").text == "2 paths match"
    assert _errors(browser) == []


def test_a_view_draws_only_its_largest_rectangles_and_zoom_shows_the_rest(tmp_path, browser):
    p = picture(synthetic_closure(600, seed=5))
    browser.open(_page(tmp_path, [p], max_drawn=80))
    rects, _ = _in_proportion(browser, p.added, p.closure_size)
    W, H = browser.js(SIZE, "#picture-0")
    assert len(rects) == 80
    status = browser.driver.find_element(By.CSS_SELECTOR, "#picture-0 .treemap-status").text
    assert status.startswith("showing the 80 largest of 600 paths")
    smallest = min(r["w"] * r["h"] for r in rects)
    by_path = {r["path"]: r for r in rects}
    drawn = set(by_path)
    # nothing left out is larger than what was drawn, at least where its parent was drawn
    for x, dom in p.dominators.items():
        if x not in drawn and (dom is None or dom in drawn):
            g = by_path[dom] if dom else {"w": W, "h": H, "band": 0, "added": p.closure_size}
            assert g["w"] * (g["h"] - g["band"]) * p.added[x] / g["added"] <= smallest * 1.001
    # zooming into a drawn parent draws children that were left out
    hidden = [x for x, dom in p.dominators.items() if dom in drawn and x not in drawn]
    parent = max(drawn - set(p.closure.roots), key=lambda d: sum(p.dominators[x] == d for x in hidden))
    assert any(p.dominators[x] == parent for x in hidden)
    browser.js("arguments[0].dispatchEvent(new MouseEvent('dblclick', {bubbles: true}))",
               browser.driver.find_element(By.CSS_SELECTOR, f'.treemap [data-path="{parent}"]'))
    now = {r["path"] for r in browser.js(RECTS, "#picture-0")}
    assert now - drawn and all(_under(p.dominators, x, parent) or x == parent for x in now)
    assert _errors(browser) == []


def test_10000_paths_draw_every_rectangle_in_proportion(tmp_path, browser):
    p = picture(synthetic_closure(10_000))
    page = _page(tmp_path, [p])
    assert page.stat().st_size < 8 * 10**6
    browser.open(page)
    rects, checked = _in_proportion(browser, p.added, p.closure_size)
    assert len(rects) == sum(1 for s in p.added.values() if s > 0) == 10_000
    for r in rects:
        assert r["parent"] == p.dominators[r["path"]]
    assert checked > 1000
    box = browser.driver.find_element(By.CSS_SELECTOR, "input[type=search]")
    box.send_keys("cudnn")
    assert browser.js("return document.querySelectorAll('[data-match]').length") == 1
    assert _errors(browser) == []


DOC_SHOT = ROOT / "docs/commands/report.png"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_screenshot_in_the_docs_is_made_here(tmp_path, browser):
    """docs/commands/report.png is this page: NIXCUDA_UPDATE_DOCS=1 writes it anew."""
    p = picture(closure_of(TORCH_ENV, ["python3-3.12.10-env"]), name="python3-3.12.10-env")
    browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": 1200, "height": 760, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.open(_page(tmp_path, [p]))
        browser.driver.find_element(By.CSS_SELECTOR, f'[data-forbidden="{store_path("magma-2.9.0")}"] button').click()
        browser.js("window.scrollTo(0, 0)")
        assert "magma-2.9.0" in browser.driver.find_element(By.ID, "details").text
        shot = browser.driver.get_screenshot_as_png()
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    if os.environ.get("NIXCUDA_UPDATE_DOCS") == "1":
        DOC_SHOT.write_bytes(shot)
    committed = DOC_SHOT.read_bytes()
    assert _png_size(committed) == _png_size(shot) == (1200, 760)
    assert len(committed) < 150_000
    assert _errors(browser) == []


def test_a_resized_window_lays_the_treemap_out_again_and_narrow_puts_the_details_below(browser, shape):
    def fills():
        rects = browser.js(RECTS, "#picture-0")
        W, H = browser.js(SIZE, "#picture-0")
        right = max(r["x"] + r["w"] for r in rects if r["parent"] is None)
        bottom = max(r["y"] + r["h"] for r in rects if r["parent"] is None)
        return (right, bottom) == pytest.approx((W, H), abs=0.05)

    try:
        for width, height in ((1400, 1000), (1000, 600), (1300, 1100), (800, 900)):
            browser.driver.set_window_size(width, height)
            browser.js("return new Promise(r => setTimeout(r, 400))")
            assert fills(), (width, height)  # no empty band left under or beside it
        # The box changing size with the window as it is (a scroll bar, the page's layout).
        browser.js("document.querySelector('#picture-0 .treemap').style.cssText = 'height: 420px; margin-right: 90px'")
        browser.js("return new Promise(r => setTimeout(r, 400))")
        assert fills()
        below = browser.js("""
          const t = document.querySelector('#picture-0 .treemap').getBoundingClientRect();
          const d = document.getElementById('details').getBoundingClientRect();
          return [d.top >= t.bottom, d.width >= t.width * 0.9];""")
        assert below == [True, True]  # under 900 px the details panel goes under the treemap
    finally:
        browser.driver.set_window_size(1400, 1000)
    assert _errors(browser) == []
