"""Drawings of captured graphs: SVG (pure Python and Graphviz), HTML, DOT and JSON."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from fuselint.graph import render

SVG = "{http://www.w3.org/2000/svg}"


def _svg_texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_python_svg_has_nodes_labels_and_breaks(captured, tmp_path, line_of):
    cap = captured("item_branch.py")
    out = render.write(tmp_path / "g.svg", cap.graphs, cap.breaks, engine="python")
    root = ET.parse(out).getroot()
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    assert len(nodes) == sum(len(g.dag) for g in cap.graphs)
    assert {n.get("id") for n in nodes} >= {"graph0/addmm", "graph1/relu"}
    texts = _svg_texts(root)
    item_line = line_of("item_branch.py", "peak = h.abs().max().item()")
    assert "addmm" in texts
    assert f"item_branch.py:{item_line}" in texts  # op labels carry their source line
    titles = ["".join(t.itertext()) for t in root.iter(f"{SVG}title")]
    assert any("fixtures/trace/item_branch.py:" in t and "aten.addmm" in t for t in titles)
    breaks = [g for g in root.iter(f"{SVG}g") if g.get("class") == "break"]
    assert len(breaks) == 1
    assert "gb0124" in "".join(breaks[0].itertext())


def test_groups_colour_nodes(captured, tmp_path):
    graph = captured("transformer_block.py").graphs[0]
    ops = [n for n in graph.ops() if graph.dag.nodes[n]["kind"] != "input"]
    half = len(ops) // 2
    groups = {name: 0 if i < half else 1 for i, name in enumerate(ops)}
    out = render.write(tmp_path / "g.svg", graph, groups=groups, engine="python")
    root = ET.parse(out).getroot()
    nodes = {g.get("id"): g for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    assert nodes[f"graph0/{ops[-1]}"].get("data-group") == "1"
    fill = {n: nodes[f"graph0/{n}"].find(f"{SVG}rect").get("fill") for n in ops}
    assert len({fill[n] for n in ops[:half]}) == 1
    assert len({fill[n] for n in ops[half:]}) == 1
    assert fill[ops[0]] != fill[ops[-1]]
    # Group ids reach the JSON too, keyed by graph/node.
    data = render.to_json([graph], groups={f"graph0/{n}": g for n, g in groups.items()})
    assert {row["group"] for row in data["nodes"] if row["name"] in groups} == {0, 1}


def test_html_puts_each_break_after_its_graph_and_embeds_the_drawing_data(captured, tmp_path):
    cap = captured("print_in_forward.py")
    out = render.write(tmp_path / "g.html", cap.graphs, cap.breaks, engine="python")
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "gb0059.html" in text and "print_in_forward.py" in text
    brk = cap.breaks[0]
    after = [g.name for g in cap.graphs].index(brk.after_graph)
    block = text.index('<div class="break">')
    assert text.index(f'data-graph="{brk.after_graph}"') < block
    if after + 1 < len(cap.graphs):
        assert block < text.index(f'data-graph="{cap.graphs[after + 1].name}"')
    start = text.index('id="fuselint-data">') + len('id="fuselint-data">')
    data = json.loads(text[start : text.index("</script>", start)].replace("<\\/", "</"))
    assert [g["name"] for g in data["graphs"]] == [g.name for g in cap.graphs]
    # Works offline: no resource to fetch; the only address in the script is SVG's namespace.
    assert "<script src" not in text and "<link" not in text and 'src="http' not in text
    assert set(re.findall(r"https?://[^\"' ]+", text.split("<script>")[-1])) == {"http://www.w3.org/2000/svg"}


def test_dot_and_json(captured, tmp_path):
    cap = captured("data_dependent_if.py")
    dot = render.write(tmp_path / "g.dot", cap.graphs, cap.breaks).read_text()
    assert dot.startswith("digraph fuselint {") and dot.rstrip().endswith("}")
    assert "cluster_0" in dot and "cluster_1" in dot and "shape=octagon" in dot
    data = json.loads(render.write(tmp_path / "g.json", cap.graphs, cap.breaks).read_text())
    assert set(data) == {"graphs", "nodes", "edges", "breaks", "plan"}
    assert data["plan"] is None
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["src"] in ids and e["dst"] in ids for e in data["edges"])
    assert data["breaks"][0]["gb_id"] == "gb0170" and data["breaks"][0]["after_graph"] == "graph0"
    assert [g["calls"] for g in data["graphs"]] == [1, 1]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_graphviz_svg_parses(captured, tmp_path):
    cap = captured("item_branch.py")
    root = ET.parse(render.write(tmp_path / "g.svg", cap.graphs, cap.breaks, engine="dot")).getroot()
    titles = {"".join(t.itertext()) for t in root.iter(f"{SVG}title")}
    assert "graph0/addmm" in titles
    assert any("graph break gb0124" in t for t in _svg_texts(root))


def test_unknown_format_is_refused(captured, tmp_path):
    with pytest.raises(ValueError, match="unknown graph format"):
        render.write(tmp_path / "g.png", captured("item_branch.py").graphs)
