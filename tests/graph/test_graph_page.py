"""The HTML page of `fuselint graph`: legend, kernel colours, module groups, folded weights, title."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter

import networkx as nx
import pytest
from click.testing import CliRunner

from fuselint.cli import main
from fuselint.graph import page, render

SVG = "{http://www.w3.org/2000/svg}"
_KERNEL_ROW = re.compile(
    r'<tr class="kernel" data-kernel="(\d+)" data-colour="(#[0-9a-f]{6})">'
    r'<td class="swatch" style="background:#[0-9a-f]{6}"></td><td>k\d+</td><td>(\d+)</td>'
)


@pytest.fixture(scope="module")
def planned(captured):
    """planned(fixture) -> (graphs, breaks, "graph/node" -> kernel) as `fuselint graph` draws them."""
    from fuselint.fusion.model import analyse, kernel_numbers

    def get(name: str):
        cap = captured(name)
        return cap.graphs, cap.breaks, kernel_numbers([analyse(cap)])

    return get


def _page_json(text: str) -> dict:
    start = text.index('<script type="application/json" id="fuselint-data">')
    body = text[text.index(">", start) + 1 : text.index("</script>", start)]
    return json.loads(body.replace("<\\/", "</"))


def test_kernel_colours_are_distinct_and_stable():
    colours = page.kernel_colours(range(600))
    assert len(set(colours.values())) == 600
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours.values())
    assert page.kernel_colours(reversed(range(600))) == colours  # order of the ids does not matter
    assert page.kernel_colours([7, 3]) == {3: colours[0], 7: colours[1]}


def test_svg_gives_each_of_forty_kernels_its_own_colour(captured, tmp_path):
    graph = captured("transformer_block.py").graphs[0]
    ops = [n for n in graph.ops() if graph.dag.nodes[n]["kind"] != "input"]
    assert len(ops) >= 40
    groups = {name: i % 40 for i, name in enumerate(ops)}
    root = ET.parse(render.write(tmp_path / "g.svg", graph, groups=groups, engine="python")).getroot()
    fills = {
        g.get("data-group"): g.find(f"{SVG}rect").get("fill")
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "node" and g.get("data-group") is not None
    }
    assert len(fills) == 40
    assert len(set(fills.values())) == 40  # the old 16-colour palette gave kernel 16 kernel 0's colour


def test_legend_lists_every_kernel_with_its_colour_and_op_count(planned, tmp_path):
    graphs, breaks, kernels = planned("transformer_stack.py")
    text = render.write(tmp_path / "g.html", graphs, breaks, kernels).read_text()
    assert '<aside id="legend">' in text
    for meaning in ("its colour is its kernel", "a folded module", "a graph break", "a tensor, from the op"):
        assert meaning in text
    rows = _KERNEL_ROW.findall(text)
    graph = graphs[0]
    ops_per_kernel = Counter(
        k for node, k in kernels.items() if graph.dag.nodes[node.split("/")[1]]["kind"] != "input"
    )
    assert {int(k): int(n) for k, _, n in rows} == dict(ops_per_kernel)
    assert len({colour for _, colour, _ in rows}) == len(ops_per_kernel) > 16
    # Each drawn op wears its kernel's legend colour.
    colour_of = {int(k): c for k, c, _ in rows}
    drawn = _page_json(text)["graphs"][0]["nodes"]
    assert all(n["fill"] == colour_of[n["k"]] for n in drawn if n["k"] is not None and n["kind"] != "input")


def test_weights_are_drawn_inside_their_only_consumer(planned, tmp_path):
    graphs, breaks, kernels = planned("transformer_stack.py")
    dag = graphs[0].dag
    drawn = _page_json(render.to_html(graphs, breaks, kernels))["graphs"][0]
    ids = [n["id"] for n in drawn["nodes"]]
    single_use = [n for n, d in dag.nodes(data=True) if d["kind"] == "input" and dag.out_degree(n) == 1]
    assert len(single_use) == 15  # 2 layers x 7 weights, and the final norm's scale
    assert not set(single_use) & set(ids)  # no weight node, so no weight edge across the canvas
    assert "arg0_1" in ids  # the activation, read by 3 ops, stays a node of its own
    qkv_weight = next(n for n in drawn["nodes"] if any(w.startswith("arg2_1 ") for w in n["w"]))
    assert dag.has_edge("arg2_1", qkv_weight["id"])
    assert "(192, 64) float32" in qkv_weight["w"][0]
    assert sum(len(n["w"]) for n in drawn["nodes"]) == 15
    assert len(drawn["edges"]) == dag.number_of_edges() - 15


_NESTED = """
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(8)
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return x + self.fc(self.norm(x)).relu()


    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(3))
            self.q = nn.Linear(8, 8)
            self.k = nn.Linear(8, 8)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.q(x) * self.k(x)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Body()
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            return self.head(self.body(x))


    def entry():
        return Net(), (torch.randn(2, 8),)
"""


def test_repeated_blocks_start_folded_inside_open_parents(tmp_path):
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry

    path = tmp_path / "nested.py"
    path.write_text(textwrap.dedent(_NESTED))
    graph = capture(load_entry(f"{path}:entry")).graphs[0]
    groups, node_groups = page.module_groups(graph, {}, page.folded_inputs(graph.dag))
    state = {g.path: g.open for g in groups}
    assert state == {
        "body": True,  # it holds the repeated blocks: open, so they show as boxes
        "body.blocks.0": False,
        "body.blocks.1": False,
        "body.blocks.2": False,
        "body.blocks.0.norm": False,
        "body.blocks.0.fc": False,
        "body.blocks.1.norm": False,
        "body.blocks.1.fc": False,
        "body.blocks.2.norm": False,
        "body.blocks.2.fc": False,
        "body.q": False,  # two Linears side by side are not blocks
        "body.k": False,
        "head": False,
    }
    assert {g.path: g.cls for g in groups}["body.blocks.1"] == "Block"
    assert {g.path: g.parent for g in groups}["body.blocks.1.fc"] == "body.blocks.1"
    relu = next(n for n in graph.ops() if graph.dag.nodes[n]["op"] == "aten.relu.default")
    assert node_groups[relu] == ("body", "body.blocks.0")


def test_html_title_names_the_model_entry_not_the_output_file(trace_fixtures, tmp_path):
    out = tmp_path / "g.html"
    result = CliRunner().invoke(
        main, ["graph", "--entry", f"{trace_fixtures / 'transformer_stack.py'}:entry", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "<h1>fuselint graph: entry (transformer_stack.py)</h1>" in text
    assert "fuselint graph: g<" not in text


def test_layers_rank_each_op_by_its_longest_path_from_the_inputs():
    dag = nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c"), ("w", "c"), ("c", "d")])
    for n in dag:
        dag.nodes[n]["kind"] = "input" if n in "aw" else "pointwise"
    layers = render._layers(dag)
    rank = {n: r for r, layer in enumerate(layers) for n in layer}
    assert rank == {"a": 0, "b": 1, "w": 1, "c": 2, "d": 3}  # the input w sits just above its consumer


def test_op_names_drop_their_namespace_and_default_overload():
    assert page.short_op("aten.addmm.default") == "addmm"
    assert page.short_op("aten.add.Tensor") == "add.Tensor"
    assert page.short_op("prims.convert_element_type.default") == "convert_element_type"
    assert page.short_op("getitem") == "getitem"
