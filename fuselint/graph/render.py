"""Draw captured graphs for `fuselint graph`: .dot, .json, .svg and .html.

Ops are nodes, coloured by kernel group when a plan's mapping (node -> group id) is given,
by graph until then; graph breaks are red octagons after the graph that ends at them; every
label and tooltip names the op's source file:line. SVG comes from Graphviz's `dot` when it is
installed and from a small pure-Python layered layout (rank = longest path from the inputs)
otherwise, so the output never depends on a binary being present.

Group mappings are keyed by "graph/node" ("graph0/add_3") or, for one graph, by node name.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import networkx as nx

from fuselint.graph.capture import GraphBreak
from fuselint.graph.fusion_graph import FusionGraph
from fuselint.graph.page import BREAK_FILL, INPUT_FILL, kernel_colours, short_op
from fuselint.graph.page import to_html as _page

FORMATS = (".dot", ".json", ".svg", ".html")
_INPUT_FILL = INPUT_FILL
_BREAK_FILL = BREAK_FILL


def _where(data: Mapping) -> str:
    return f"{Path(data['file']).name}:{data['line']}" if data.get("file") else ""


def _group_of(groups: Mapping[str, int] | None, graph: FusionGraph, node: str, single: bool) -> int | None:
    if not groups:
        return None
    key = f"{graph.name}/{node}"
    if key in groups:
        return groups[key]
    return groups.get(node) if single else None


def _colours(graphs: Sequence[FusionGraph], groups: Mapping[str, int] | None) -> dict[int, str]:
    """One distinct colour per kernel, or per graph when there is no plan."""
    return kernel_colours(groups.values() if groups else range(len(graphs)))


def _fill(data: Mapping, group: int | None, graph_index: int, colours: Mapping[int, str]) -> str:
    if data["kind"] == "input":
        return _INPUT_FILL
    return colours.get(group if group is not None else graph_index, "#f4f4f4")


def _tooltip(graph: FusionGraph, node: str, data: Mapping, group: int | None) -> str:
    lines = [f"{graph.name}/{node}: {data['op']} ({data['kind']})"]
    if data.get("shape") != ():
        lines.append(f"shape {data['shape']} {data['dtype']}")
    if data.get("file"):
        lines.append(f"{data['file']}:{data['line']}")
    if data.get("module"):
        lines.append(f"module {data['module']}")
    if group is not None:
        lines.append(f"kernel group {group}")
    return "\n".join(lines)


def _label(node: str, data: Mapping) -> str:
    if data["kind"] == "input":
        shape = data.get("shape")
        return (
            f"{node}\n{tuple(shape)}"
            if isinstance(shape, tuple) and shape and isinstance(shape[0], int)
            else node
        )
    where = _where(data)
    return f"{short_op(data['op'])}\n{where}" if where else short_op(data["op"])


def _break_label(brk: GraphBreak) -> str:
    return f"graph break {brk.gb_id}\n{Path(brk.file).name}:{brk.line}".strip()


def _break_tooltip(brk: GraphBreak) -> str:
    parts = [f"graph break {brk.gb_id} at {brk.file}:{brk.line}", brk.reason]
    if brk.explored:
        parts.append(f"only {brk.explored} explored")
    return "\n".join(p for p in parts if p)


# ---------------------------------------------------------------- JSON


def to_json(
    graphs: Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
    plan: Mapping | None = None,
) -> dict:
    """Nodes and edges of every graph (ids "graph/node"), the breaks, and the plan mapping."""
    single = len(graphs) == 1
    nodes, edges, summary = [], [], []
    for g in graphs:
        summary.append({"name": g.name, "calls": g.calls, "ops": len(g.dag)})
        for name, data in g.dag.nodes(data=True):
            row = {k: v for k, v in data.items() if k != "fx"}
            row.update(id=f"{g.name}/{name}", name=name, graph=g.name)
            row["group"] = _group_of(groups, g, name, single)
            nodes.append(row)
        for u, v, d in g.dag.edges(data=True):
            edges.append({"src": f"{g.name}/{u}", "dst": f"{g.name}/{v}", "bytes": d.get("bytes", 0)})
    return {
        "graphs": summary,
        "nodes": nodes,
        "edges": edges,
        "breaks": [dict(asdict(b), url=b.url) for b in breaks],
        "plan": dict(plan) if plan is not None else (dict(groups) if groups else None),
    }


# ---------------------------------------------------------------- DOT


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(
    graphs: Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
) -> str:
    single = len(graphs) == 1
    colours = _colours(graphs, groups)
    out = [
        "digraph fuselint {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [color="#666666"];',
    ]
    for gi, g in enumerate(graphs):
        out.append(f"  subgraph cluster_{gi} {{")
        out.append(f"    label={_q(f'{g.name} (runs {g.calls}x per call, {len(g.dag)} ops)')};")
        for name, data in g.dag.nodes(data=True):
            group = _group_of(groups, g, name, single)
            attrs = {
                "label": _label(name, data),
                "tooltip": _tooltip(g, name, data, group),
                "fillcolor": _fill(data, group, gi, colours),
            }
            if data["kind"] == "input":
                attrs["shape"] = "ellipse"
            if data.get("is_output"):
                attrs["penwidth"] = "2"
            out.append(
                f"    {_q(f'{g.name}/{name}')} [{', '.join(f'{k}={_q(v)}' for k, v in attrs.items())}];"
            )
        out.append("  }")
        for u, v in g.dag.edges():
            out.append(f"  {_q(f'{g.name}/{u}')} -> {_q(f'{g.name}/{v}')};")
    names = {g.name: g for g in graphs}
    for bi, brk in enumerate(breaks):
        node = f"break{bi}"
        out.append(
            f"  {node} [shape=octagon, fillcolor={_q(_BREAK_FILL)}, fontcolor=white, "
            f"label={_q(_break_label(brk))}, tooltip={_q(_break_tooltip(brk))}];"
        )
        before = names.get(brk.after_graph)
        if before is not None:
            for name, data in before.dag.nodes(data=True):
                if data.get("is_output"):
                    out.append(
                        f"  {_q(f'{before.name}/{name}')} -> {node} [style=dashed, color={_q(_BREAK_FILL)}];"
                    )
    out.append("}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- SVG (pure Python)

_W, _H, _DX, _DY, _PAD = 150, 36, 24, 34, 30


def _layers(dag: nx.DiGraph) -> list[list[str]]:
    """Nodes by rank (longest path from a source), each rank ordered to cut edge crossings."""
    rank = {n: r for r, generation in enumerate(nx.topological_generations(dag)) for n in generation}
    for n in dag.nodes:
        # Inputs sit just above their first consumer rather than all on the top row.
        if dag.in_degree(n) == 0 and dag.out_degree(n) > 0:
            rank[n] = max(0, min(rank[s] for s in dag.successors(n)) - 1)
    layers: list[list[str]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for n in dag.nodes:  # FX order: a stable first guess
        layers[rank[n]].append(n)
    position: dict[str, float] = {}
    for layer in layers:
        # Barycentre of the predecessors' positions keeps chains roughly vertical.
        def centre(n: str) -> float:
            preds = [position[p] for p in dag.predecessors(n)]
            return sum(preds) / len(preds) if preds else float(len(position))

        layer.sort(key=centre)
        for i, n in enumerate(layer):
            position[n] = float(i)
    return layers


def _text(x: float, y: float, text: str, size: int = 10, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="middle" '
        f'font-family="Helvetica, Arial, sans-serif"{extra}>{html.escape(text)}</text>'
    )


def _fit(text: str, width: int = _W - 8, size: int = 10) -> str:
    room = max(4, int(width / (size * 0.55)))
    return text if len(text) <= room else text[: room - 1] + "…"


def svg_python(
    graphs: Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
) -> str:
    """A layered drawing of the graphs side by side, breaks below the graph they end."""
    single = len(graphs) == 1
    colours = _colours(graphs, groups)
    body: list[str] = []
    x0 = _PAD
    height = 0.0
    anchors: dict[str, tuple[float, float]] = {}  # graph name -> bottom centre
    for gi, g in enumerate(graphs):
        layers = _layers(g.dag)
        width = max((len(layer) for layer in layers), default=1) * (_W + _DX) - _DX
        width = max(width, _W)
        top = _PAD + 24
        pos: dict[str, tuple[float, float]] = {}
        for r, layer in enumerate(layers):
            offset = x0 + (width - (len(layer) * (_W + _DX) - _DX)) / 2
            for i, n in enumerate(layer):
                pos[n] = (offset + i * (_W + _DX), top + r * (_H + _DY))
        bottom = top + len(layers) * (_H + _DY) - _DY
        body.append(f'<g class="graph" id="{html.escape(g.name)}">')
        body.append(
            f'<rect x="{x0 - 10}" y="{_PAD - 6}" width="{width + 20}" height="{bottom - _PAD + 16}" '
            f'fill="none" stroke="#999" stroke-dasharray="4 3" rx="6"/>'
        )
        body.append(
            _text(x0 + width / 2, _PAD + 10, f"{g.name}: runs {g.calls}x per call, {len(g.dag)} ops", 12,
                  font_weight="bold")
        )  # fmt: skip
        for u, v in g.dag.edges():
            (ux, uy), (vx, vy) = pos[u], pos[v]
            body.append(
                f'<path class="edge" d="M{ux + _W / 2:.1f},{uy + _H:.1f} C{ux + _W / 2:.1f},{uy + _H + _DY / 2:.1f} '
                f'{vx + _W / 2:.1f},{vy - _DY / 2:.1f} {vx + _W / 2:.1f},{vy:.1f}" fill="none" stroke="#777" '
                f'marker-end="url(#arrow)"/>'
            )
        for n, data in g.dag.nodes(data=True):
            x, y = pos[n]
            group = _group_of(groups, g, n, single)
            label = _label(n, data).split("\n")
            rx = _H / 2 if data["kind"] == "input" else 6
            stroke = 'stroke="#000" stroke-width="2"' if data.get("is_output") else 'stroke="#555"'
            group_attr = f' data-group="{group}"' if group is not None else ""
            body.append(
                f'<g class="node" id="{html.escape(f"{g.name}/{n}")}" data-kind="{data["kind"]}"{group_attr}>'
                f"<title>{html.escape(_tooltip(g, n, data, group))}</title>"
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{_W}" height="{_H}" rx="{rx}" '
                f'fill="{_fill(data, group, gi, colours)}" {stroke}/>'
            )
            if len(label) == 1:
                body.append(_text(x + _W / 2, y + _H / 2 + 4, _fit(label[0])))
            else:
                body.append(_text(x + _W / 2, y + 15, _fit(label[0])))
                body.append(_text(x + _W / 2, y + 29, _fit(label[1], size=9), 9, fill="#333"))
            body.append("</g>")
        body.append("</g>")
        anchors[g.name] = (x0 + width / 2, bottom)
        height = max(height, bottom)
        x0 += width + 3 * _DX
    # Breaks: under the graph they end, or in a column of their own when no graph ends there.
    stacked: dict[str, int] = {}
    loose_x = x0
    for bi, brk in enumerate(breaks):
        if brk.after_graph in anchors:
            cx, by = anchors[brk.after_graph]
            k = stacked.get(brk.after_graph, 0)
            stacked[brk.after_graph] = k + 1
            cy = by + _DY + 30 + k * (_H + _DY + 10)
            body.append(
                f'<path d="M{cx:.1f},{by:.1f} L{cx:.1f},{cy - 28:.1f}" stroke="{_BREAK_FILL}" '
                f'stroke-dasharray="5 3" fill="none" marker-end="url(#arrow)"/>'
            )
        else:
            cx, cy = loose_x + _W / 2, _PAD + 60 + stacked.get("", 0) * (_H + _DY + 30)
            stacked[""] = stacked.get("", 0) + 1
        r = 30
        pts = " ".join(
            f"{cx + r * 1.6 * dx:.1f},{cy + r * dy:.1f}"
            for dx, dy in ((-0.41, -1), (0.41, -1), (1, -0.41), (1, 0.41), (0.41, 1), (-0.41, 1), (-1, 0.41), (-1, -0.41))
        )  # fmt: skip
        label = _break_label(brk).split("\n")
        body.append(
            f'<g class="break" id="break{bi}"><title>{html.escape(_break_tooltip(brk))}</title>'
            f'<polygon points="{pts}" fill="{_BREAK_FILL}" stroke="#800"/>'
            + _text(cx, cy - 2, label[0], 10, fill="white")
            + (_text(cx, cy + 12, _fit(label[1], 90, 9), 9, fill="white") if len(label) > 1 else "")
            + "</g>"
        )
        height = max(height, cy + r)
        if brk.after_graph not in anchors:
            loose_x = max(loose_x, x0)
    total_w = (
        max(loose_x + (_W + _PAD if any(b.after_graph not in anchors for b in breaks) else 0), x0) + _PAD
    )
    total_h = height + 2 * _PAD
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>'
        f'<rect width="100%" height="100%" fill="white"/>'
    )
    return head + "\n".join(body) + "</svg>\n"


def svg(
    graphs: Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
    *,
    engine: str = "auto",
    timeout: float = 60.0,
) -> str:
    """SVG text from Graphviz `dot` when installed (engine "auto"/"dot"), else pure Python."""
    dot = shutil.which("dot") if engine in ("auto", "dot") else None
    if dot:
        try:
            done = subprocess.run(
                [dot, "-Tsvg"], input=to_dot(graphs, breaks, groups), capture_output=True, text=True,
                timeout=timeout, check=True,
            )  # fmt: skip
            return done.stdout
        except (subprocess.SubprocessError, OSError):
            pass  # a huge graph or a broken install: the pure-Python layout still works
    return svg_python(graphs, breaks, groups)


# ---------------------------------------------------------------- HTML


def to_html(
    graphs: Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
    *,
    title: str = "fuselint graph",
) -> str:
    """A page with a legend and one foldable drawing per graph (see `fuselint.graph.page`)."""
    fills = [] if groups else [_colours(graphs, None)[i] for i in range(len(graphs))]
    return _page(graphs, breaks, groups, title=title, graph_fills=fills)


def title_for(entries: Sequence[str]) -> str:
    """ "fuselint graph: tiny_llama (models.py)" from entry specs "path/to/models.py:tiny_llama"."""
    names = []
    for spec in entries:
        target, _, factory = spec.rpartition(":")
        names.append(f"{factory} ({Path(target).name})" if target else spec)
    return f"fuselint graph: {', '.join(dict.fromkeys(names))}" if names else "fuselint graph"


# ---------------------------------------------------------------- files


def write(
    path: str | Path,
    graphs: FusionGraph | Sequence[FusionGraph],
    breaks: Sequence[GraphBreak] = (),
    groups: Mapping[str, int] | None = None,
    *,
    engine: str = "auto",
    plan: Mapping | None = None,
    title: str | None = None,
) -> Path:
    """Write the drawing in the format the suffix names (.dot, .json, .svg, .html).

    `title` heads the HTML page; name the model there (`title_for(entry specs)`): without it
    the page falls back to the file's name."""
    path = Path(path)
    if isinstance(graphs, FusionGraph):
        graphs = [graphs]
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = json.dumps(to_json(graphs, breaks, groups, plan), indent=1, default=str) + "\n"
    elif suffix == ".dot":
        text = to_dot(graphs, breaks, groups)
    elif suffix == ".svg":
        text = svg(graphs, breaks, groups, engine=engine)
    elif suffix in (".html", ".htm"):
        text = to_html(graphs, breaks, groups, title=title or f"fuselint graph: {path.stem}")
    else:
        raise ValueError(f"unknown graph format {path.suffix!r}: use one of {', '.join(FORMATS)}")
    path.write_text(text, encoding="utf-8")
    return path
