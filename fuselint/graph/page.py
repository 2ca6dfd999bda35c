"""The HTML page of `fuselint graph`: a legend, one drawing per graph, modules that fold.

Python decides what is drawn; a short inline script (no library, no network) lays it out in
the browser, because folding a module changes the layout and the reader folds them at will.

- Every op is a node coloured by its kernel; the colours are distinct (`kernel_colours`).
- Ops are grouped by the modules that ran them (dynamo's `nn_module_stack`). A group that
  holds a block repeated beside it (`layers.0`, `layers.1`, ... of one class) starts folded,
  and so does every group without such a block inside; the groups above repeated blocks start
  open, so a 4-layer LLaMA reads as its 4 layer boxes until the reader opens one.
- An input read by a single op (a weight, a bias, a norm's scale) is folded into that op: a
  chip on its left edge and a tooltip line, so no weight edge crosses the canvas.
- `#open=layers.0,norm` (or `#open=all`) in the address opens those groups on load.
"""

from __future__ import annotations

import colorsys
import html
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from fuselint.graph.capture import GraphBreak
from fuselint.graph.fusion_graph import FusionGraph

NO_KERNEL_FILL = "#f4f4f4"
INPUT_FILL = "#e4e4e4"
BREAK_FILL = "#e41a1c"
_GOLDEN_ANGLE = 137.50776405


def kernel_colours(kernels: Iterable[int]) -> dict[int, str]:
    """A distinct, light colour per kernel id, the same for the same ids on every run.

    Hues step by the golden angle so that neighbouring ids differ most; saturation and
    lightness cycle so that ids far apart on the hue circle still differ; a colour already
    given (hex rounding can collide past a few hundred kernels) is nudged until it is new.
    """
    out: dict[int, str] = {}
    taken: set[str] = set()
    for i, k in enumerate(sorted(set(kernels))):
        hue = (i * _GOLDEN_ANGLE) % 360 / 360
        light = (0.80, 0.70, 0.88)[i % 3]
        sat = (0.70, 0.50, 0.85)[(i // 3) % 3]
        colour = _hex(hue, light, sat)
        step = 0
        while colour in taken:
            step += 1
            colour = _hex((hue + step / 997) % 1.0, light, sat)
        taken.add(colour)
        out[k] = colour
    return out


def _hex(hue: float, light: float, sat: float) -> str:
    r, g, b = colorsys.hls_to_rgb(hue, light, sat)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


# ---------------------------------------------------------------- what is drawn


def _clean_module_path(path: str) -> str:
    # dynamo spells "L['self'].model.layers[0]" or "L['self']._modules['layers']._modules['0']";
    # readers know the attribute path "model.layers.0" (the same spelling as FusionGraph's module).
    path = re.sub(r"^L\['[^']*'\]\.?", "", str(path))
    path = re.sub(r"\._modules\['([^']*)'\]", r".\1", path)
    path = re.sub(r"\[(?:'([^']*)'|(\d+))\]", lambda m: "." + (m.group(1) or m.group(2)), path)
    return path.lstrip(".")


def _class_name(cls: object) -> str:
    if isinstance(cls, type):
        return cls.__name__
    return str(cls).rsplit(".", 1)[-1].strip("'>")


def module_stack(data: Mapping) -> tuple[tuple[str, str], ...]:
    """(path, class name) of each module whose forward ran the op, outermost first."""
    fx = data.get("fx")
    stack = (fx.meta.get("nn_module_stack") if fx is not None else None) or {}
    out: list[tuple[str, str]] = []
    for path, cls in stack.values():
        clean = _clean_module_path(path)
        if clean and all(clean != p for p, _ in out):
            out.append((clean, _class_name(cls)))
    return tuple(out)


def folded_inputs(dag: nx.DiGraph) -> dict[str, str]:
    """Input node -> the one op that reads it (weights, biases, scales): drawn inside that op."""
    return {
        n: next(iter(dag.successors(n)))
        for n, d in dag.nodes(data=True)
        if d["kind"] == "input" and dag.out_degree(n) == 1
    }


@dataclass(frozen=True)
class ModuleGroup:
    """Ops run inside one module, drawn as one box while folded."""

    path: str
    cls: str
    parent: str | None
    ops: int
    kernels: tuple[int, ...]
    open: bool


def module_groups(
    graph: FusionGraph, kernels: Mapping[str, int | None], folded: Mapping[str, str]
) -> tuple[list[ModuleGroup], dict[str, tuple[str, ...]]]:
    """The module groups of a graph (those holding 2 ops or more) and each node's groups."""
    stacks = {n: module_stack(d) for n, d in graph.dag.nodes(data=True) if n not in folded}
    members: Counter[str] = Counter(p for s in stacks.values() for p, _ in s)
    kept = {p for p, count in members.items() if count >= 2}
    cls_of: dict[str, str] = {}
    parent_of: dict[str, str | None] = {}
    node_groups: dict[str, tuple[str, ...]] = {}
    for n, stack in stacks.items():
        paths = [(p, c) for p, c in stack if p in kept]
        node_groups[n] = tuple(p for p, _ in paths)
        for i, (p, c) in enumerate(paths):
            cls_of.setdefault(p, c)
            parent_of.setdefault(p, paths[i - 1][0] if i else None)
    # A block: one of several siblings of one class that hold modules of their own (decoder
    # layers, ResNet stages), not the q/k/v Linears of one attention.
    has_children = {parent for parent in parent_of.values() if parent is not None}
    siblings = Counter((parent_of[p], cls_of[p]) for p in has_children)
    repeated = {p for p in has_children if siblings[(parent_of[p], cls_of[p])] >= 2}
    # A group opens by default only to show the repeated blocks inside it.
    holds_repeat: set[str] = set()
    for p in repeated:
        up = parent_of[p]
        while up is not None:
            holds_repeat.add(up)
            up = parent_of[up]
    kernels_in: dict[str, set[int]] = {p: set() for p in cls_of}
    for n, paths in node_groups.items():
        if kernels.get(n) is not None:
            for p in paths:
                kernels_in[p].add(kernels[n])  # type: ignore[arg-type]
    order = list(dict.fromkeys(p for paths in node_groups.values() for p in paths))
    groups = [
        ModuleGroup(
            path=p,
            cls=cls_of[p],
            parent=parent_of[p],
            ops=members[p],
            kernels=tuple(sorted(kernels_in[p])),
            open=p in holds_repeat,
        )
        for p in order
    ]
    return groups, node_groups


# ---------------------------------------------------------------- the page's data


def short_op(op: str) -> str:
    """ "aten.addmm.default" -> "addmm"; a non-default overload stays visible ("add.Tensor")."""
    parts = op.split(".")
    if parts[0] in ("aten", "prims") and len(parts) >= 2:
        return parts[1] if len(parts) == 2 or parts[2] == "default" else f"{parts[1]}.{parts[2]}"
    return op


def _shape_text(data: Mapping) -> str:
    shape = data.get("shape")
    return f"{tuple(shape)} {data.get('dtype', '')}".strip() if shape not in ((), None) else ""


def _tooltip(graph: FusionGraph, node: str, data: Mapping, kernel: int | None, groups: Sequence[str]) -> str:
    lines = [f"{graph.name}/{node}: {data['op']} ({data['kind']})"]
    if _shape_text(data):
        lines.append(f"shape {_shape_text(data)}")
    if data.get("file"):
        lines.append(f"{data['file']}:{data['line']}")
    if groups:
        lines.append(f"module {groups[-1]}")
    elif data.get("module"):
        lines.append(f"module {data['module']}")
    if kernel is not None:
        lines.append(f"kernel k{kernel}")
    return "\n".join(lines)


def _graph_data(
    graph: FusionGraph, kernel_of: Mapping[str, int | None], colours: Mapping[int, str], fill: str
) -> dict:
    dag = graph.dag
    folded = folded_inputs(dag)
    groups, node_groups = module_groups(graph, kernel_of, folded)
    drawn = [n for n in dag.nodes if n not in folded]
    index = {n: i for i, n in enumerate(drawn)}
    weights: dict[str, list[str]] = {n: [] for n in drawn}
    for w, consumer in folded.items():
        weights[consumer].append(f"{w} {_shape_text(dag.nodes[w])}".strip())
    nodes = []
    for n in drawn:
        data = dag.nodes[n]
        kernel = kernel_of.get(n)
        where = f"{Path(data['file']).name}:{data['line']}" if data.get("file") else ""
        if data["kind"] == "input":
            colour, label, where = INPUT_FILL, n, _shape_text(data)
        else:
            colour = colours[kernel] if kernel is not None else (fill if not colours else NO_KERNEL_FILL)
            label = short_op(data["op"])
        nodes.append(
            {
                "id": n,
                "label": label,
                "where": where,
                "tip": _tooltip(graph, n, data, kernel, node_groups[n]),
                "kind": data["kind"],
                "k": kernel,
                "fill": colour,
                "out": bool(data.get("is_output")),
                "m": list(node_groups[n]),
                "w": weights[n],
            }
        )
    edges = [[index[u], index[v]] for u, v in dag.edges if u in index and v in index]
    return {
        "name": graph.name,
        "calls": graph.calls,
        "nodes": nodes,
        "edges": edges,
        "groups": [
            {
                "path": g.path,
                "label": _relative(g.path, g.parent),
                "cls": g.cls,
                "parent": g.parent,
                "n": g.ops,
                "k": list(g.kernels),
                "colours": [colours[k] for k in g.kernels],
                "open": g.open,
            }
            for g in groups
        ],
    }


def _relative(path: str, parent: str | None) -> str:
    """A folded module's name inside its open parent: "mlp", or "layer1.0" rather than "0"."""
    if not parent:
        return path
    rest = path.removeprefix(f"{parent}.")
    return f"{parent.rsplit('.', 1)[-1]}.{rest}" if rest.isdigit() else rest


def _kernel_of(graph: FusionGraph, groups: Mapping[str, int] | None, single: bool) -> dict[str, int | None]:
    if not groups:
        return {n: None for n in graph.dag.nodes}
    return {n: groups.get(f"{graph.name}/{n}", groups.get(n) if single else None) for n in graph.dag.nodes}


def _kernel_rows(graphs: Sequence[FusionGraph], kernel_of: Sequence[Mapping[str, int | None]]) -> list[dict]:
    """Per kernel: its graph, how many ops it runs, and the module most of them come from."""
    rows: dict[int, dict] = {}
    for g, mapping in zip(graphs, kernel_of, strict=True):
        for n, k in mapping.items():
            if k is None or g.dag.nodes[n]["kind"] == "input":
                continue
            row = rows.setdefault(k, {"kernel": k, "graph": g.name, "ops": 0, "modules": Counter()})
            row["ops"] += 1
            row["modules"][g.dag.nodes[n].get("module") or "(top level)"] += 1
    out = []
    for k in sorted(rows):
        row = rows[k]
        (module, _), *_ = sorted(row["modules"].items(), key=lambda kv: (-kv[1], kv[0]))
        out.append({"kernel": k, "graph": row["graph"], "ops": row["ops"], "module": module})
    return out


# ---------------------------------------------------------------- HTML

_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 1.2em; color: #222; }
h1 { font-size: 22px; margin: 0 0 0.3em; } h2 { font-size: 17px; margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; margin: 0.4em 0 1em; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; font-size: 13px; }
.layout { display: flex; gap: 1.5em; align-items: flex-start; }
#legend { flex: 0 0 380px; font-size: 13px; position: sticky; top: 0.5em; max-height: 95vh; overflow: auto; }
#legend svg { vertical-align: middle; }
#legend .kernels td { padding: 1px 6px; white-space: nowrap; }
#legend .kernels td:last-child { max-width: 170px; overflow: hidden; text-overflow: ellipsis; }
.swatch { width: 26px; }
.figures { flex: 1 1 auto; min-width: 0; }
.drawing { overflow: auto; border: 1px solid #ddd; max-height: 85vh; }
.controls button { font-size: 12px; margin-right: 0.5em; }
.break { color: #a00; margin: 0.6em 0; }
g.module, g.frame-head { cursor: pointer; }
g.node:hover rect, g.module:hover rect { stroke: #d00; stroke-width: 3; }
"""

# The page lays the drawing out itself (see `layout` below): what is drawn changes each time the
# reader opens or folds a module.
_JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("fuselint-data").textContent);
  var W = 150, H = 36, DX = 26, DY = 50, PAD = 24, FX = 12, FY = 20, NS = "http://www.w3.org/2000/svg";
  var hash = decodeURIComponent(location.hash.replace(/^#/, ""));
  var asked = hash.indexOf("open=") === 0 ? hash.slice(5).split(",") : [];
  var state = data.graphs.map(function (g) {
    var s = {}, parent = {};
    g.groups.forEach(function (grp) { s[grp.path] = asked.indexOf("all") >= 0 || grp.open; parent[grp.path] = grp.parent; });
    asked.forEach(function (p) { for (; p in s; p = parent[p]) s[p] = true; });  // and the modules around it
    return s;
  });

  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function fit(text, width, size) {
    var room = Math.max(4, Math.floor(width / (size * 0.56)));
    return text.length <= room ? text : text.slice(0, room - 1) + "\u2026";
  }

  // A compound layout: each open module is a frame laid out on its own, as one block inside
  // its parent, so no frame covers an op from outside it. At every level the units (ops,
  // folded modules, open sub-frames) stack below the units they read from, then move down to
  // just above their first reader (inputs, and ops that read only weights, like a norm's
  // rsqrt(var + eps), would otherwise crowd the top), then take the leftmost columns free over
  // their height.
  function layout(g, open) {
    var byPath = {};
    g.groups.forEach(function (grp) { byPath[grp.path] = grp; });
    var items = [], itemOf = {}, rep = g.nodes.map(function (n, i) {
      var key = "n:" + i;
      for (var j = 0; j < n.m.length; j++) if (!open[n.m[j]]) { key = "m:" + n.m[j]; break; }
      if (!(key in itemOf)) {
        itemOf[key] = items.length;
        items.push({ key: key, order: items.length, node: key[0] === "n" ? n : null,
                     group: key[0] === "m" ? byPath[key.slice(2)] : null,
                     frames: key[0] === "n" ? n.m.slice() : n.m.slice(0, n.m.indexOf(key.slice(2))),
                     preds: [], succs: [], w: W, h: H });
      }
      return itemOf[key];
    });
    var seen = {};
    g.edges.forEach(function (e) {
      var a = rep[e[0]], b = rep[e[1]], key = a + ">" + b;
      if (a === b || seen[key]) return;
      seen[key] = true;
      items[a].succs.push(b); items[b].preds.push(a);
    });
    var root = { path: "", depth: 0, units: [], sub: {}, all: [], order: 0 };
    items.forEach(function (it, i) {
      var f = root;
      root.all.push(i);
      it.frames.forEach(function (p, d) {
        if (!f.sub[p]) {
          f.sub[p] = { path: p, depth: d + 1, units: [], sub: {}, all: [], order: it.order };
          f.units.push(f.sub[p]);
        }
        f = f.sub[p];
        f.all.push(i);
      });
      f.units.push(it);
    });
    function unitOf(f, i) {
      var it = items[i];
      return it.frames.length > f.depth ? f.sub[it.frames[f.depth]] : it;
    }
    function size(f) {
      f.units.forEach(function (u) { if (u.units) size(u); u.up = []; u.down = []; });
      var inside = {};
      f.all.forEach(function (i) { inside[i] = true; });
      var linked = {};
      f.all.forEach(function (i) {
        items[i].succs.forEach(function (s) {
          if (!inside[s]) return;
          var a = unitOf(f, i), b = unitOf(f, s), key = a.order + ">" + b.order + (a.units ? "f" : "") + (b.units ? "f" : "");
          if (a === b || linked[key]) return;
          linked[key] = true;
          a.down.push(b); b.up.push(a);
        });
      });
      // Topological order of the units; folding can close a cycle, cut at the earliest unit.
      var left = f.units.slice(), done = [];
      left.forEach(function (u) { u.wait = u.up.length; u.y = undefined; });
      while (left.length) {
        var k = 0;
        for (var j = 0; j < left.length; j++) if (left[j].wait === 0) { k = j; break; }
        var u = left.splice(k, 1)[0];
        done.push(u);
        u.down.forEach(function (d) { d.wait--; });
      }
      done.forEach(function (u) {
        u.y = 0;
        u.up.forEach(function (p) { if (p.y !== undefined) u.y = Math.max(u.y, p.y + p.h + DY); });
      });
      for (var d = done.length - 1; d >= 0; d--) {
        var v = done[d], below = v.down.filter(function (s) { return s.y > v.y; });
        if (below.length) v.y = Math.max(v.y, Math.min.apply(null, below.map(function (s) { return s.y; })) - DY - v.h);
      }
      var placed = [];
      done.forEach(function (u) {
        var near = placed.filter(function (p) { return p.y < u.y + u.h + DY && u.y < p.y + p.h + DY; });
        var starts = [0].concat(near.map(function (p) { return p.dx + p.w + DX; }));
        starts.sort(function (a, b) { return a - b; });
        var x0 = 0;
        for (var c = 0; c < starts.length; c++) {
          x0 = starts[c];
          if (near.every(function (p) { return x0 >= p.dx + p.w + DX || p.dx >= x0 + u.w + DX; })) break;
        }
        u.dx = x0;
        placed.push(u);
      });
      var innerW = W, innerH = H;
      placed.forEach(function (u) { innerW = Math.max(innerW, u.dx + u.w); innerH = Math.max(innerH, u.y + u.h); });
      f.w = innerW + 2 * FX;
      f.h = innerH + FY + FX;
      f.innerW = innerW; f.innerH = innerH;
    }
    size(root);
    var frameList = [];
    function put(f, left, top) {
      f.units.forEach(function (u) {
        u.x = left + u.dx;
        var y = top + u.y;
        if (u.units) {
          u.width = u.w; u.height = u.h; u.yy = y;
          frameList.push(u);
          put(u, u.x + FX, y + FY);
        } else {
          u.y = y;
        }
      });
    }
    put(root, PAD, PAD);
    frameList.forEach(function (f) { f.y = f.yy; });
    return { items: items, frames: frameList };
  }

  function draw(gi) {
    var g = data.graphs[gi], open = state[gi];
    var holder = document.getElementById("drawing-" + gi);
    holder.textContent = "";
    var drawn = layout(g, open), items = drawn.items;
    var maxX = 0, maxY = 0;
    items.forEach(function (it) { maxX = Math.max(maxX, it.x + W); maxY = Math.max(maxY, it.y + H); });
    drawn.frames.forEach(function (f) {
      maxX = Math.max(maxX, f.x + f.width); maxY = Math.max(maxY, f.y + f.height);
    });
    var width = Math.ceil(maxX + PAD), height = Math.ceil(maxY + PAD);
    var svg = el("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
                          "class": "graph-drawing", "data-graph": g.name }, holder);
    var defs = el("defs", {}, svg);
    var marker = el("marker", { id: "arrow-" + gi, viewBox: "0 0 10 10", refX: 9, refY: 5,
                                markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#777" }, marker);
    el("rect", { width: "100%", height: "100%", fill: "white" }, svg);
    drawn.frames.forEach(function (b) {
      var p = b.path, grp = g.groups.filter(function (q) { return q.path === p; })[0];
      var f = el("g", { "class": "frame", "data-path": p }, svg);
      el("rect", { x: b.x, y: b.y, width: b.width, height: b.height, rx: 8, fill: "none", stroke: "#8a8a8a",
                   "stroke-dasharray": "5 3" }, f);
      var head = el("g", { "class": "frame-head", "data-path": p }, f);
      el("title", {}, head, "click to fold " + p);
      el("text", { x: b.x + 6, y: b.y + 12, "font-size": 11, fill: "#444" }, head,
         fit("\u25be " + p + " \u00b7 " + grp.cls, b.width - 8, 11));
      head.addEventListener("click", function () { state[gi][p] = false; draw(gi); });
    });
    items.forEach(function (it) {
      it.succs.forEach(function (s) {
        var v = items[s], x1 = it.x + W / 2, y1 = it.y + H, x2 = v.x + W / 2, y2 = v.y;
        var bend = Math.max(20, Math.abs(y2 - y1) / 2);
        el("path", { "class": "edge", d: "M" + x1 + "," + y1 + " C" + x1 + "," + (y1 + bend) + " " + x2 + "," +
                     (y2 - bend) + " " + x2 + "," + y2, fill: "none", stroke: "#888",
                     "marker-end": "url(#arrow-" + gi + ")" }, svg);
      });
    });
    items.forEach(function (it) {
      if (it.group) {
        var grp = it.group;
        var m = el("g", { "class": "module", "data-path": grp.path, "data-state": "folded" }, svg);
        el("title", {}, m, grp.path + " (" + grp.cls + "): " + grp.n + " ops in " + grp.k.length +
           " kernel(s); click to open");
        el("rect", { x: it.x, y: it.y, width: W, height: H, rx: 3, fill: "#ffffff", stroke: "#333",
                     "stroke-width": 2 }, m);
        el("text", { x: it.x + W / 2, y: it.y + 14, "font-size": 11, "text-anchor": "middle",
                     "font-weight": "bold" }, m, fit("\u25b8 " + grp.label, W - 8, 11));
        el("text", { x: it.x + W / 2, y: it.y + 26, "font-size": 9, "text-anchor": "middle", fill: "#333" }, m,
           fit(grp.n + " ops \u00b7 " + grp.k.length + " k \u00b7 " + grp.cls, W - 8, 9));
        var strip = grp.colours.slice(0, 40), sw = (W - 8) / Math.max(1, strip.length);
        strip.forEach(function (c, j) {
          el("rect", { x: it.x + 4 + j * sw, y: it.y + H - 6, width: sw, height: 4, fill: c }, m);
        });
        m.addEventListener("click", function () { state[gi][grp.path] = true; draw(gi); });
        return;
      }
      var n = it.node;
      var attrs = { "class": "node", "data-id": n.id, "data-kind": n.kind, "data-modules": n.m.join(" ") };
      if (n.k !== null) attrs["data-kernel"] = n.k;
      var node = el("g", attrs, svg);
      el("title", {}, node, n.tip + (n.w.length ? "\nreads " + n.w.join(", ") : ""));
      el("rect", { x: it.x, y: it.y, width: W, height: H, rx: n.kind === "input" ? H / 2 : 6, fill: n.fill,
                   stroke: n.out ? "#000" : "#555", "stroke-width": n.out ? 2.5 : 1 }, node);
      el("text", { x: it.x + W / 2, y: it.y + (n.where ? 15 : 22), "font-size": 11, "text-anchor": "middle" },
         node, fit(n.label, W - 16, 11));
      if (n.where) el("text", { x: it.x + W / 2, y: it.y + 29, "font-size": 9, "text-anchor": "middle",
                                fill: "#333" }, node, fit(n.where, W - 16, 9));
      if (n.w.length) {
        var chip = el("g", { "class": "weights" }, node);
        el("rect", { x: it.x - 9, y: it.y + 9, width: 16, height: 18, rx: 3, fill: "#4a4a4a" }, chip);
        el("text", { x: it.x - 1, y: it.y + 22, "font-size": 10, "text-anchor": "middle", fill: "white" },
           chip, String(n.w.length));
      }
    });
  }

  function drawAll() { data.graphs.forEach(function (g, gi) { draw(gi); }); }
  document.getElementById("open-all").addEventListener("click", function () {
    state.forEach(function (s) { for (var p in s) s[p] = true; }); drawAll();
  });
  document.getElementById("fold-default").addEventListener("click", function () {
    data.graphs.forEach(function (g, gi) { g.groups.forEach(function (grp) { state[gi][grp.path] = grp.open; }); });
    drawAll();
  });
  drawAll();
  document.body.setAttribute("data-drawn", "yes");
})();
"""


def _legend_shape(kind: str) -> str:
    shapes = {
        "op": '<rect x="1" y="1" width="34" height="16" rx="4" fill="#b3de69" stroke="#555"/>',
        "input": f'<rect x="1" y="1" width="34" height="16" rx="8" fill="{INPUT_FILL}" stroke="#555"/>',
        "output": '<rect x="1" y="1" width="34" height="16" rx="4" fill="#b3de69" stroke="#000" stroke-width="2.5"/>',
        "nokernel": f'<rect x="1" y="1" width="34" height="16" rx="4" fill="{NO_KERNEL_FILL}" stroke="#555"/>',
        "module": '<rect x="1" y="1" width="34" height="16" rx="2" fill="#fff" stroke="#333" stroke-width="2"/>'
        '<rect x="4" y="12" width="9" height="3" fill="#8dd3c7"/><rect x="13" y="12" width="9" height="3" '
        'fill="#fb8072"/><rect x="22" y="12" width="9" height="3" fill="#80b1d3"/>',
        "frame": '<rect x="1" y="1" width="34" height="16" rx="4" fill="none" stroke="#8a8a8a" stroke-dasharray="5 3"/>',
        "weights": '<rect x="10" y="1" width="24" height="16" rx="4" fill="#b3de69" stroke="#555"/>'
        '<rect x="2" y="3" width="12" height="12" rx="2" fill="#4a4a4a"/>'
        '<text x="8" y="13" font-size="9" fill="white" text-anchor="middle">2</text>',
        "edge": '<path d="M2,9 L30,9" stroke="#888"/><path d="M28,5 L35,9 L28,13 z" fill="#777"/>',
        "break": f'<polygon points="12,1 24,1 34,6 34,12 24,17 12,17 2,12 2,6" fill="{BREAK_FILL}"/>',
    }
    return f'<svg width="36" height="18" class="shape-{kind}">{shapes[kind]}</svg>'


_LEGEND_ITEMS = (
    ("op", "an ATen op; its colour is its kernel"),
    ("nokernel", "an op in no kernel (a view that moves no data)"),
    ("output", "an op whose value leaves the graph"),
    ("input", "a graph input read by several ops"),
    ("weights", "the number of inputs only this op reads (weights, biases): hover for their shapes"),
    ("module", "a folded module: its kernels' colours below; click to open"),
    ("frame", "an open module: click its name to fold it"),
    ("edge", "a tensor, from the op that makes it to the op that reads it"),
    ("break", "a graph break: the graph ends, Python runs, a new graph starts"),
)


def _tail(path: str) -> str:
    parts = path.split(".")
    return "…" + ".".join(parts[-3:]) if len(parts) > 3 else path


def _legend(kernel_rows: Sequence[dict], colours: Mapping[int, str], by_graph: bool) -> str:
    shapes = "".join(
        f'<tr class="shape"><td>{_legend_shape(kind)}</td><td>{html.escape(text)}</td></tr>'
        for kind, text in _LEGEND_ITEMS
    )
    if by_graph:
        kernels = "<p>No fusion plan was given: ops are coloured by graph.</p>"
    else:
        rows = "".join(
            f'<tr class="kernel" data-kernel="{r["kernel"]}" data-colour="{colours[r["kernel"]]}">'
            f'<td class="swatch" style="background:{colours[r["kernel"]]}"></td><td>k{r["kernel"]}</td>'
            f"<td>{r['ops']}</td><td>{html.escape(r['graph'])}</td>"
            f'<td title="{html.escape(r["module"])}">{html.escape(_tail(r["module"]))}</td></tr>'
            for r in kernel_rows
        )
        kernels = (
            f"<h2>Kernels ({len(kernel_rows)})</h2>"
            '<table class="kernels"><tr><th></th><th>kernel</th><th>ops</th><th>graph</th>'
            f"<th>mostly in</th></tr>{rows}</table>"
        )
    return f'<aside id="legend"><h2>Legend</h2><table class="shapes">{shapes}</table>{kernels}</aside>'


def _break_block(brk: GraphBreak) -> str:
    where = f"{html.escape(brk.file)}:{brk.line}"
    link = f'<a href="{html.escape(brk.url)}">{brk.gb_id}</a>' if brk.url else html.escape(brk.gb_id)
    return (
        f'<div class="break">{_legend_shape("break")} graph break {link} at {where}: '
        f"{html.escape(brk.reason)}</div>"
    )


def _break_row(brk: GraphBreak) -> str:
    link = f'<a href="{html.escape(brk.url)}">{brk.gb_id}</a>' if brk.url else brk.gb_id
    reason = html.escape(brk.reason)
    if brk.explored:
        reason += f" (only {html.escape(brk.explored)} explored)"
    return f"<tr><td>{html.escape(brk.file)}:{brk.line}</td><td>{link}</td><td>{reason}</td><td>{brk.hits}</td></tr>"


def page_data(
    graphs: Sequence[FusionGraph], groups: Mapping[str, int] | None, graph_fills: Sequence[str]
) -> tuple[dict, list[dict], dict[int, str]]:
    """What the page's script draws, the legend's kernel rows, and the kernel colours."""
    single = len(graphs) == 1
    kernel_of = [_kernel_of(g, groups, single) for g in graphs]
    rows = _kernel_rows(graphs, kernel_of)
    colours = kernel_colours(r["kernel"] for r in rows)
    drawn = [
        _graph_data(g, k, colours, fill) for g, k, fill in zip(graphs, kernel_of, graph_fills, strict=True)
    ]
    return {"graphs": drawn}, rows, colours


def to_html(
    graphs: Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
    *,
    title: str = "fuselint graph",
    graph_fills: Sequence[str] = (),
) -> str:
    """The page: title, legend, one foldable drawing per graph with its breaks after it."""
    fills = list(graph_fills) or [NO_KERNEL_FILL] * len(graphs)
    data, rows, colours = page_data(graphs, groups, fills)
    # "</" inside a script element would end it early.
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    names = {g.name for g in graphs}
    sections = []
    for gi, g in enumerate(graphs):
        ops = sum(1 for _, d in g.dag.nodes(data=True) if d["kind"] != "input")
        sections.append(
            f'<section class="figure" data-graph="{html.escape(g.name)}"><h2>{html.escape(g.name)}: '
            f"{ops} ops, runs {g.calls}x per call</h2>"
            f'<div class="drawing" id="drawing-{gi}"></div></section>'
        )
        sections.extend(_break_block(b) for b in breaks if b.after_graph == g.name)
    sections.extend(_break_block(b) for b in breaks if b.after_graph not in names)
    break_rows = "".join(_break_row(b) for b in breaks)
    breaks_table = (
        f"<table><tr><th>where</th><th>id</th><th>reason</th><th>hits</th></tr>{break_rows}</table>"
        if breaks
        else "<p>No graph breaks.</p>"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
        '<p class="controls">Hover an op for its shape, dtype and source line; click a module to open '
        'or fold it. <button id="open-all">open every module</button>'
        '<button id="fold-default">fold to blocks</button></p>\n'
        f'<div class="layout">{_legend(rows, colours, by_graph=not groups)}<div class="figures">'
        f"{''.join(sections)}<h2>Graph breaks</h2>{breaks_table}</div></div>\n"
        "<noscript>The drawing needs JavaScript; `fuselint graph -o g.svg` writes a static one.</noscript>\n"
        f'<script type="application/json" id="fuselint-data">{payload}</script>\n'
        f"<script>{_JS}</script>\n</body></html>\n"
    )
