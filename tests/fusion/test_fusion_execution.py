"""Running a plan group by group, each group seeing only its inputs, gives the graph's outputs.

This checks the contract the backend relies on: `nodes` hold everything a kernel computes
(views included), `inputs` are enough to compute it, `outputs` hold every value a later group
or the graph's output needs, and groups come in an order that makes that possible.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fusion_capture import aten_graph, traced_reference
from fusion_references import REFERENCES
from torch import nn

from fuselint.fusion.plan import FusionPlan, PlanOptions, plan


def _run_node(node: torch.fx.Node, env: dict):
    args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
    return node.target(*args, **kwargs)


def run_plan(p: FusionPlan, args) -> list:
    gm = p.graph.gm
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    memory = {n.name: a for n, a in zip(placeholders, args, strict=True)}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            memory[n.name] = getattr(gm, n.target)
    fx = {n.name: n for n in gm.graph.nodes}
    for g in p.groups:
        local = {v: memory[v] for v in g.inputs}  # a kernel sees only what it reads
        for name in g.nodes:
            if name not in local:
                local[name] = _run_node(fx[name], local)
        for v in g.outputs:
            memory[v] = local[v]
    # graph outputs may be views of written values: apply those views to memory
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]

    def fetch(node: torch.fx.Node):
        if node.name not in memory:
            memory[node.name] = _run_node(node, {a.name: fetch(a) for a in node.all_input_nodes})
        return memory[node.name]

    return [fetch(a) if isinstance(a, torch.fx.Node) else a for a in out.args[0]]


def _same(p: FusionPlan, args) -> None:
    want = p.graph.gm(*args)
    got = run_plan(p, args)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)


def _graph_inputs(fg) -> list[torch.Tensor]:
    """Fresh inputs for the captured graph (parameters and buffers are lifted to inputs):
    labels in range, floats in [0.5, 1.5) so that BatchNorm's running variance stays valid."""
    inputs = []
    for n in fg.gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta["val"]
            if v.dtype == torch.int64:
                inputs.append(torch.randint(0, 10, tuple(v.shape)))
            else:
                inputs.append((torch.rand(tuple(v.shape)) + 0.5).to(v.dtype))
    return inputs


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_reference_plans_run_group_by_group(name):
    fg = traced_reference(name)
    real = _graph_inputs(fg)
    _same(plan(fg), real)
    _same(plan(fg, PlanOptions(epilogue_into_matmul=True, horizontal=False)), real)


CASES = {
    "recompute": (lambda a, b: ((a + b).sin().sum(0), (a + b).sin().sum(1)), (8, 16), (8, 16)),
    "materialize": (lambda x: (torch.softmax(x, -1).sum(0), torch.softmax(x, -1) * 2), (8, 16)),
    "cat_rope": (lambda x, c: x * c + torch.cat([-x[..., 8:], x[..., :8]], -1) * c.sin(), (4, 16), (4, 16)),
    "bn": (
        nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)).eval(),
        (2, 4, 8, 8),
    ),
    "ce": (F.cross_entropy, (8, 10), "labels"),
    "rms": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, (4, 8, 32), (32,)),
    "dim0": (lambda x: (x / x.sum(0, keepdim=True)).exp(), (4, 16)),
    "mm_fork": (lambda x, w: torch.cos(torch.sin(x) @ w + torch.sin(x)), (16, 16), (16, 16)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_more_plans_run_group_by_group(name):
    fn, *shapes = CASES[name]
    args = [torch.randint(0, 10, (8,)) if s == "labels" else torch.randn(*s) for s in shapes]
    fg = aten_graph(fn, *args)
    _same(plan(fg), _graph_inputs(fg))
