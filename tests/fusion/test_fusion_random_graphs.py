"""Property test: on random programs the plan is well formed and runs to the graph's results.

Programs mix pointwise ops, broadcasts, row and column reductions, LayerNorm, matmuls,
transposes, cat, pad, gather and slices over 8x8 tensors, so merges meet cycles, views and multi-consumer values.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_fusion_execution import run_plan
from test_fusion_plan import _check_well_formed
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx

from fuselint.fusion.plan import PlanOptions, plan
from fuselint.graph.fusion_graph import FusionGraph

INDEX = torch.tensor([[(r * 3 + c) % 8 for c in range(8)] for r in range(8)])
UNARY = [torch.sin, torch.exp, torch.relu, torch.neg, torch.sigmoid, torch.tanh]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "unary",
                "add",
                "mul",
                "rowsum",
                "colmax",
                "mean",
                "mm",
                "t",
                "cat",
                "softmax",
                "norm",
                "pad",
                "gather",
            ]
        ),
        st.integers(0, 1000),
        st.integers(0, 1000),
        st.integers(0, len(UNARY) - 1),
    ),
    min_size=1,
    max_size=14,
)


def _program(steps):
    def fn(x, y, w, index):
        pool = [x, y]
        for op, i, j, u in steps:
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            if op == "unary":
                out = UNARY[u](a)
            elif op == "add":
                out = a + b
            elif op == "mul":
                out = a * b
            elif op == "rowsum":
                out = a.sum(-1, keepdim=True)
            elif op == "colmax":
                out = a.amax(0, keepdim=True)
            elif op == "mean":
                out = a.mean()
            elif op == "mm":
                out = a.expand(8, 8) @ w
            elif op == "t":
                out = a.t()
            elif op == "cat":
                out = torch.cat([a.expand(8, 8), b.expand(8, 8)], -1)[:, u : u + 8]
            elif op == "norm":
                out = F.layer_norm(a.expand(8, 8), (8,))
            elif op == "pad":
                out = F.pad(a.expand(8, 8), (1, 1))[..., 1 + u % 2 : 9 + u % 2]
            elif op == "gather":
                out = a.expand(8, 8).gather(1, index)
            else:
                out = torch.softmax(a, -1)
            pool.append(out)
        return tuple(pool[2:][-3:])

    return fn


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS, st.booleans())
# found in session 25: a pointwise op merged side by side with two cats' group, whose cats another
# group then computed, was left alone in a group still called injective
@example(
    [("unary", 0, 0, 0), ("gather", 0, 0, 0), ("unary", 0, 0, 0), ("cat", 0, 3, 0), ("cat", 0, 183, 0)], False
)
def test_random_programs_plan_and_run(steps, horizontal):
    fn = _program(steps)
    args = (torch.rand(8, 8) + 0.5, torch.rand(8, 8) + 0.5, torch.rand(8, 8), INDEX)
    gm = make_fx(fn, tracing_mode="fake", decomposition_table=select_decomp_table())(*args)
    fg = FusionGraph.from_fx(gm)
    for options in (PlanOptions(horizontal=horizontal), PlanOptions(max_nodes=3, epilogue_into_matmul=True)):
        p = plan(fg, options)
        _check_well_formed(p)
        want = gm(*args)
        got = run_plan(p, args)
        for w, g in zip(want, got, strict=True):
            torch.testing.assert_close(g, w, equal_nan=True)
