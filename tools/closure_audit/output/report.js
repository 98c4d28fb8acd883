// The treemap, details, search and zoom of a closure-audit report
// (docs/commands/report.md). The page carries its data as JSON; this script lays out
// a view lazily, largest rectangles first, and draws at most DATA.maxDrawn
// of them: a closure of 100,000 paths stays quick, and zooming shows the rest.
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("closure-data").textContent);
  var MAX_DRAWN = DATA.maxDrawn;
  var LABEL_W = 40, LABEL_H = 13, SIZE_H = 26;  // px a label needs; a second line for the size
  var BAND_H = 14;  // a group's band: its name and added size, above what it holds
  var REFERRERS_SHOWN = 200;
  var pictures = [];
  var selected = null;  // {picture, node}
  var query = "";

  function fmt(n) {
    var units = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
    for (var u = 0; u < units.length; u++) {
      if (n >= units[u][1]) return (n / units[u][1]).toFixed(1) + " " + units[u][0];
    }
    return n + " B";
  }

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Squarified layout (Bruls, Huizing, van Wijk): `sizes` sorted largest
  // first, all positive; rectangles filling (x, y, w, h) with areas in
  // proportion, as [x, y, w, h] in the order of `sizes`.
  function squarify(sizes, x, y, w, h) {
    var out = new Array(sizes.length), total = 0, i, k;
    for (i = 0; i < sizes.length; i++) total += sizes[i];
    var scale = w * h / total;
    i = 0;
    while (i < sizes.length) {
      var side = Math.min(w, h), side2 = side * side, first = sizes[i] * scale;
      var j = i, sum = 0, best = Infinity;
      while (j < sizes.length) {
        var a = sizes[j] * scale, s = sum + a;
        var worst = Math.max(side2 * first / (s * s), (s * s) / (side2 * a));
        if (worst > best) break;
        best = worst; sum = s; j++;
      }
      var last = j === sizes.length;
      if (w >= h) {  // a column on the left
        var cw = last ? w : sum / h, yy = y;
        for (k = i; k < j; k++) {
          var hh = last && k === j - 1 ? y + h - yy : sizes[k] * scale / cw;
          out[k] = [x, yy, cw, hh]; yy += hh;
        }
        x += cw; w -= cw;
      } else {  // a row on top
        var rh = last ? h : sum / w, xx = x;
        for (k = i; k < j; k++) {
          var ww = last && k === j - 1 ? x + w - xx : sizes[k] * scale / rh;
          out[k] = [xx, y, ww, rh]; xx += ww;
        }
        y += rh; h -= rh;
      }
      i = j;
    }
    return out;
  }

  // A max-heap of views waiting to be drawn, by area.
  function Heap() { this.a = []; }
  Heap.prototype.push = function (item) {
    var a = this.a, i = a.length;
    a.push(item);
    while (i > 0) {
      var p = (i - 1) >> 1;
      if (a[p].area >= item.area) break;
      a[i] = a[p]; i = p;
    }
    a[i] = item;
  };
  Heap.prototype.pop = function () {
    var a = this.a, top = a[0], last = a.pop();
    if (a.length) {
      var i = 0, n = a.length;
      for (;;) {
        var l = 2 * i + 1, r = l + 1, m = i;
        var mArea = last.area;
        if (l < n && a[l].area > mArea) { m = l; mArea = a[l].area; }
        if (r < n && a[r].area > mArea) m = r;
        if (m === i) break;
        a[i] = a[m]; i = m;
      }
      a[i] = last;
    }
    return top;
  };

  function Picture(section, d) {
    this.section = section;
    this.d = d;
    this.n = d.names.length;
    this.top = this.n;  // the node above the roots
    this.box = section.querySelector(".treemap");
    this.crumbs = section.querySelector(".crumbs");
    this.status = section.querySelector(".treemap-status");
    this.zoom = this.top;
    this.els = {};
    this.lower = null;
    this.rev = null;
    this.closureMemo = {};
    this.byPath = {};
    this.kids = [];
    this.subtree = [];  // paths drawn at most under each node, itself included
    var i, n = this.n;
    for (i = 0; i <= n; i++) this.kids.push([]);
    for (i = 0; i < n; i++) {
      this.byPath[d.store + d.names[i]] = i;
      if (d.added[i] > 0) this.kids[d.dom[i] < 0 ? n : d.dom[i]].push(i);
    }
    var added = d.added;
    for (i = 0; i <= n; i++) this.kids[i].sort(function (a, b) { return added[b] - added[a] || a - b; });
    this.countSubtrees();
    var self = this;
    this.box.addEventListener("click", function (e) {
      var t = e.target.closest("[data-path]");
      if (t) select(self, +t.getAttribute("data-i"));
    });
    this.box.addEventListener("dblclick", function (e) {
      var t = e.target.closest("[data-path]");
      if (t) self.zoomTo(+t.getAttribute("data-i"));
    });
  }

  Picture.prototype.countSubtrees = function () {
    // Post-order without recursion: dominator trees can be deep.
    var n = this.n, count = new Array(n + 1), stack = [this.top], order = [], i, k;
    while (stack.length) {
      var v = stack.pop();
      order.push(v);
      var ks = this.kids[v];
      for (k = 0; k < ks.length; k++) stack.push(ks[k]);
    }
    for (i = order.length - 1; i >= 0; i--) {
      var u = order[i], c = u === this.top ? 0 : 1, kk = this.kids[u];
      for (k = 0; k < kk.length; k++) c += count[kk[k]];
      count[u] = c;
    }
    this.subtree = count;
  };

  Picture.prototype.name = function (i) {
    return this.d.names[i].slice(33) || this.d.names[i];
  };

  Picture.prototype.path = function (i) {
    return this.d.store + this.d.names[i];
  };

  Picture.prototype.matches = function (i) {
    if (!query) return false;
    if (!this.lower) {
      this.lower = [];
      for (var k = 0; k < this.n; k++) this.lower.push(this.name(k).toLowerCase());
    }
    return this.lower[i].indexOf(query) >= 0;
  };

  Picture.prototype.dominator = function (i) {
    return this.d.dom[i] < 0 ? this.top : this.d.dom[i];
  };

  Picture.prototype.referrers = function (i) {
    if (!this.rev) {
      var rev = [], k, r, refs = this.d.refs;
      for (k = 0; k < this.n; k++) rev.push([]);
      for (k = 0; k < this.n; k++) for (r = 0; r < refs[k].length; r++) rev[refs[k][r]].push(k);
      this.rev = rev;
    }
    return this.rev[i];
  };

  // Nix's closure size where the dump had it; otherwise one traversal.
  Picture.prototype.closureSize = function (i) {
    if (this.d.closure) return this.d.closure[i];
    if (this.closureMemo[i] === undefined) {
      var seen = new Uint8Array(this.n), stack = [i], size = 0, refs = this.d.refs;
      seen[i] = 1;
      while (stack.length) {
        var v = stack.pop();
        size += this.d.nar[v];
        for (var r = 0; r < refs[v].length; r++) {
          if (!seen[refs[v][r]]) { seen[refs[v][r]] = 1; stack.push(refs[v][r]); }
        }
      }
      this.closureMemo[i] = size;
    }
    return this.closureMemo[i];
  };

  Picture.prototype.rect = function (v, x, y, w, h, px, py, depth) {
    var d = this.d, e = document.createElement("div");
    e.className = "k" + d.kind[v] + " d" + (depth % 5);
    e.setAttribute("data-i", v);
    e.setAttribute("data-path", this.path(v));
    e.setAttribute("data-added-size", d.added[v]);
    e.title = this.name(v) + "\nadded " + fmt(d.added[v]);
    e.style.cssText = "left:" + (x - px) + "px;top:" + (y - py) + "px;width:" + w + "px;height:" + h + "px";
    if (this.matches(v)) e.setAttribute("data-match", "");
    if (selected && selected.picture === this && selected.node === v) e.setAttribute("data-selected", "");
    this.els[v] = e;
    return e;
  };

  // A name, and its size on a second line where there is room, in a
  // rectangle of w x h px; nothing where it does not fit.
  function label(e, text, size, w, h) {
    if (w < LABEL_W || h < LABEL_H) return;
    var s = el("span", "label", text);
    s.style.maxWidth = w + "px";
    if (h >= SIZE_H) s.appendChild(el("small", null, fmt(size)));
    e.appendChild(s);
  }

  // Lay out what a drawn path (or the top) holds. A path that dominates
  // others is a group, as bundle analysers draw them: a band across its top
  // with its name and added size, then, below it, its own bytes as one slice
  // and the paths it dominates, with areas in proportion to their sizes.
  // A path that dominates nothing is labelled in its whole rectangle.
  Picture.prototype.expand = function (heap, it, e) {
    var v = it.v, ks = this.kids[v], d = this.d, added = d.added, k;
    if (e && !ks.length) {
      label(e, this.name(v), added[v], it.w, it.h);
      return;
    }
    var x = it.x, y = it.y, w = it.w, h = it.h;
    if (e && w >= LABEL_W && h >= BAND_H + 2 * LABEL_H) {
      var band = el("span", "label band", this.name(v) + " · " + fmt(added[v]));
      band.style.width = w + "px";
      e.appendChild(band);
      y += BAND_H; h -= BAND_H;
    }
    var own = e ? d.nar[v] : 0, items = ks.slice(), sizes = [];
    if (own > 0) {  // its own slice, in its place by size
      var at = 0;
      while (at < items.length && added[items[at]] >= own) at++;
      items.splice(at, 0, -1);
    }
    for (k = 0; k < items.length; k++) sizes.push(items[k] < 0 ? own : added[items[k]]);
    var rects = squarify(sizes, x, y, w, h);
    for (k = 0; k < items.length; k++) {
      var r = rects[k];
      if (items[k] < 0) {
        var o = el("div", "own k" + d.kind[v] + " d" + ((it.depth + 1) % 5));
        o.setAttribute("data-own-size", own);
        o.title = this.name(v) + "\nits own files: " + fmt(own);
        o.style.cssText = "left:" + (r[0] - it.x) + "px;top:" + (r[1] - it.y) + "px;width:" + r[2] +
          "px;height:" + r[3] + "px";
        label(o, "own files", own, r[2], r[3]);
        e.appendChild(o);
        continue;
      }
      heap.push({v: items[k], x: r[0], y: r[1], w: r[2], h: r[3], area: r[2] * r[3],
                 parent: e, px: e ? it.x : 0, py: e ? it.y : 0, depth: it.depth + (e ? 1 : 0)});
    }
  };

  Picture.prototype.draw = function () {
    var W = this.box.clientWidth, H = this.box.clientHeight;
    var root = document.createDocumentFragment(), heap = new Heap(), drawn = 0;
    this.els = {};
    this.laidOut = [W, H];
    var whole = {v: this.zoom, x: 0, y: 0, w: W, h: H, area: W * H, parent: null, px: 0, py: 0, depth: 0};
    if (this.zoom === this.top) this.expand(heap, whole, null);
    else heap.push(whole);
    while (heap.a.length && drawn < MAX_DRAWN) {
      var it = heap.pop();
      var e = this.rect(it.v, it.x, it.y, it.w, it.h, it.px, it.py, it.depth);
      (it.parent || root).appendChild(e);
      drawn++;
      this.expand(heap, it, e);
    }
    this.box.replaceChildren(root);
    this.drawCrumbs();
    var total = this.subtree[this.zoom];
    this.status.textContent = drawn < total
      ? "showing the " + drawn.toLocaleString() + " largest of " + total.toLocaleString() +
        " paths here; double-click a rectangle to zoom in"
      : total.toLocaleString() + " path" + (total === 1 ? "" : "s") + " here";
  };

  Picture.prototype.drawCrumbs = function () {
    var chain = [], v = this.zoom, self = this;
    while (v !== this.top) { chain.unshift(v); v = this.dominator(v); }
    chain.unshift(this.top);
    this.crumbs.replaceChildren();
    chain.forEach(function (c, k) {
      var text = c === self.top ? "whole closure" : self.name(c);
      if (k) self.crumbs.appendChild(el("span", "sep", " › "));
      if (k === chain.length - 1) {
        self.crumbs.appendChild(el("span", "here", text));
      } else {
        var b = el("button", "crumb", text);
        b.type = "button";
        b.addEventListener("click", function () { self.zoomTo(c); });
        self.crumbs.appendChild(b);
      }
    });
  };

  Picture.prototype.zoomTo = function (v) {
    this.zoom = v;
    this.draw();
  };

  // Zoom so that path i is drawn, and select it.
  Picture.prototype.reveal = function (i) {
    if (!this.els[i]) this.zoomTo(this.dominator(i));
    if (!this.els[i]) this.zoomTo(i);
    select(this, i);
    this.box.scrollIntoView({block: "nearest"});
  };

  Picture.prototype.search = function () {
    var count = 0, i;
    for (i = 0; i < this.n; i++) if (this.d.added[i] > 0 && this.matches(i)) count++;
    for (var key in this.els) {
      if (this.matches(+key)) this.els[key].setAttribute("data-match", "");
      else this.els[key].removeAttribute("data-match");
    }
    return count;
  };

  function fact(dl, term, value, title) {
    var box = el("div"), dd = el("dd", null, value);
    if (title) dd.title = title;
    box.appendChild(el("dt", null, term));
    box.appendChild(dd);
    dl.appendChild(box);
    return dd;
  }

  function linkTo(p, i) {
    var b = el("button", "goto", p.name(i));
    b.type = "button";
    b.title = p.path(i);
    b.addEventListener("click", function () { p.reveal(i); });
    return b;
  }

  function select(p, i) {
    if (selected && selected.picture.els[selected.node]) {
      selected.picture.els[selected.node].removeAttribute("data-selected");
    }
    selected = {picture: p, node: i};
    if (p.els[i]) p.els[i].setAttribute("data-selected", "");
    var d = p.d, box = document.getElementById("details");
    box.replaceChildren();
    box.appendChild(el("h2", null, p.name(i)));
    if (pictures.length > 1) box.appendChild(el("p", "in", "in " + p.section.querySelector("h2").textContent));
    var dl = el("dl");
    fact(dl, "store path", p.path(i)).className = "path";
    fact(dl, "NAR size", fmt(d.nar[i]), d.nar[i] + " bytes");
    var cs = p.closureSize(i);
    fact(dl, "closure size", fmt(cs), cs + " bytes");
    fact(dl, "added size", fmt(d.added[i]), d.added[i] + " bytes");
    var kind = ["", "a CUDA redistributable", "forbidden"][d.kind[i]];
    if (kind) fact(dl, "kind", kind);
    var dom = p.dominator(i);
    if (dom !== p.top) fact(dl, "dominated by", "").appendChild(linkTo(p, dom));
    var refs = p.referrers(i).slice().sort(function (a, b) { return p.name(a) < p.name(b) ? -1 : 1; });
    var dd = fact(dl, "referrers (" + refs.length + ")", refs.length ? "" : "none: a root");
    if (refs.length) {
      var ul = el("ul", "referrers");
      refs.slice(0, REFERRERS_SHOWN).forEach(function (r) {
        var li = el("li");
        li.appendChild(linkTo(p, r));
        ul.appendChild(li);
      });
      if (refs.length > REFERRERS_SHOWN) ul.appendChild(el("li", null, "… " + (refs.length - REFERRERS_SHOWN) + " more"));
      dd.appendChild(ul);
    }
    box.appendChild(dl);
    if (p.kids[i].length) {
      var z = el("button", "zoom", "zoom into its " + p.subtree[i].toLocaleString() + " paths");
      z.type = "button";
      z.addEventListener("click", function () { p.zoomTo(i); });
      box.appendChild(z);
    }
  }

  function onSearch(e) {
    query = e.target.value.trim().toLowerCase();
    var count = 0;
    pictures.forEach(function (p) { count += p.search(); });
    document.getElementById("search-status").textContent =
      query ? count.toLocaleString() + " path" + (count === 1 ? "" : "s") + " match" + (count === 1 ? "es" : "") : "";
  }

  var sections = document.querySelectorAll("section.picture");
  DATA.pictures.forEach(function (d, k) {
    var p = new Picture(sections[k], d);
    pictures.push(p);
    sections[k].querySelectorAll("[data-goto]").forEach(function (b) {
      b.addEventListener("click", function () {
        var i = p.byPath[b.getAttribute("data-goto")];
        if (i !== undefined) p.reveal(i);
      });
    });
  });
  pictures.forEach(function (p) { p.draw(); });
  document.getElementById("search").addEventListener("input", onSearch);
  // Laid out again whenever a treemap's box changes size: a window resized,
  // the details panel moving under the pictures, a scroll bar coming.
  var pending = null;
  var observer = new ResizeObserver(function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      pictures.forEach(function (p) {
        if (p.box.clientWidth !== p.laidOut[0] || p.box.clientHeight !== p.laidOut[1]) p.draw();
      });
    }, 100);
  });
  pictures.forEach(function (p) { observer.observe(p.box); });
  // When the first view is on screen: benchmarks and tests read it.
  requestAnimationFrame(function () {
    requestAnimationFrame(function () {
      document.body.setAttribute("data-drawn-ms", Math.round(performance.now()));
    });
  });
})();
