"""Matmuls run right before their first reader, where no more memory is held for it."""

from __future__ import annotations

import torch
from backend_helpers import aten_graph

from fuselint.backend.compiler import sink_matmuls


def projections(inp, wq, wk, wv):
    x = inp.relu()  # read only by the three projections
    q, k, v = x @ wq, x @ wk, x @ wv
    return torch.sin(q) * torch.cos(k), v * 2


def _last_mm_before_its_reader(gm: torch.fx.GraphModule) -> bool:
    """Is the last matmul right before its first reader?"""
    mms = [n for n in gm.graph.nodes if n.target == torch.ops.aten.mm.default]
    return mms[-1].next is min(mms[-1].users, key=list(gm.graph.nodes).index)


def _inputs(n: int, m: int):
    gen = torch.Generator().manual_seed(0)
    return torch.randn(32, n, generator=gen), *(torch.randn(n, m, generator=gen) for _ in range(3))


def test_a_projection_moves_past_other_kernels_when_its_input_is_no_larger_than_its_result():
    args = _inputs(16, 16)  # x and v take the same bytes: v is allocated later, x freed later
    gm = aten_graph(projections, *args)
    expected = gm(*args)
    assert not _last_mm_before_its_reader(gm)
    assert sink_matmuls(gm) == 2  # v's, then k's: x is alive until v's now
    assert _last_mm_before_its_reader(gm)
    order = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    assert order == ["relu", "mm", "sin", "mm_1", "cos", "mul", "mm_2", "mul_1"]
    for got, want in zip(gm(*args), expected, strict=True):
        assert torch.equal(got, want)


def test_a_projection_stays_where_it_frees_an_input_larger_than_its_result():
    args = _inputs(64, 4)  # moving v's matmul would hold x, 16 times v's bytes, across the kernel
    gm = aten_graph(projections, *args)
    assert sink_matmuls(gm) == 0
    assert not _last_mm_before_its_reader(gm)


def test_a_matmul_stays_before_a_write_to_its_input():
    def written_after_use(a, b, c):
        y = a * 2
        out = y @ b
        y.add_(c)  # make_fx keeps the write; the matmul must read y before it
        return out + y.sum()

    args = (torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4))
    gm = aten_graph(written_after_use, *args)
    expected = gm(*args)
    assert sink_matmuls(gm) == 0
    assert torch.equal(gm(*args), expected)


def test_a_matmul_stays_before_a_write_through_a_view_of_its_input():
    def written_through_a_view(a, b):
        y = a * 2
        out = y @ b
        y.view(-1).add_(1)
        return out + y.sum()

    a, b = torch.randn(4, 4), torch.randn(4, 4)
    gm = aten_graph(written_through_a_view, a, b)
    expected = gm(a, b)
    assert sink_matmuls(gm) == 0
    assert torch.equal(gm(a, b), expected)
