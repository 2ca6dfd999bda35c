"""A missed class judge10 found on speechbrain 1.1.2 (bench/results/precision_untuned10.md,
augment/freq_domain.py:154, `torch.randint(low, high, size=(batch_size, n_masks))` with `n_masks`
drawn by `torch.randint`): a tensor among the sizes of a tuple or list display. FL101 flagged a
tensor handed as a size one by one (`torch.zeros(2, n)`) but not in `torch.zeros((2, n))`,
`size=(2, n)`, `torch.randint(0, 5, (2, n))`, `x.new_zeros((2, n))` or `x.view((n, -1))`.
Dynamo (torch 2.13) reads the tensor on the host in each (gb0033, "Data dependent operator");
sizes read off a shape trace."""

from __future__ import annotations

import pytest
from source_rules_helpers import lines

SOURCE = """
    import torch
    from torch import nn


    class Sizes(nn.Module):
        def forward(self, x):
            n = torch.randint(low=1, high=3, size=(1,))
            a = torch.randint(low=0, high=5, size=(2, n))
            b = torch.zeros((2, n))
            c = torch.randint(0, 5, (2, n))
            d = x.new_zeros((2, n))
            e = x.view((n, -1))
            f = x.reshape([n, -1])
            g = torch.zeros(size=(2, n))
            h = torch.randn((2, x.shape[0]))
            i = x.view(x.shape[0], -1)
            return a, b, c, d, e, f, g, h, i
"""

# Each flagged statement, alone after the draw of `n`, as in SOURCE.
FLAGGED = {
    9: "torch.randint(low=0, high=5, size=(2, n))",
    10: "torch.zeros((2, n))",
    11: "torch.randint(0, 5, (2, n))",
    12: "x.new_zeros((2, n))",
    13: "x.view((n, -1))",
    14: "x.reshape([n, -1])",
    15: "torch.zeros(size=(2, n))",
}
QUIET = ["torch.randn((2, x.shape[0]))", "x.view(x.shape[0], -1)"]


def test_tensor_in_a_size_display_flagged():
    assert lines(SOURCE, "FL101") == sorted(FLAGGED)


def _breaks(expression: str) -> bool:
    """Whether dynamo counts a graph break compiling `n = <draw>; return <expression>` (not
    fullgraph: there dynamo captures the read instead of breaking)."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    namespace: dict = {"torch": torch}
    body = f"def f(x):\n    n = torch.randint(low=1, high=3, size=(1,))\n    return {expression}\n"
    exec(compile(body, "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    torch._dynamo.reset()
    counters.clear()
    torch.compile(namespace["f"], backend="eager")(torch.randn(2, 2))
    return sum(counters["graph_break"].values()) > 0


@pytest.mark.parametrize("expression", [*FLAGGED.values(), *QUIET])
def test_flagged_sizes_break_and_shape_sizes_trace(expression):
    assert _breaks(expression) is (expression not in QUIET)
