"""Same-file functions handed to a call run under the caller's trace: `functools.partial(f, ...)`,
`map(f, xs)`, a loss handed to a wrapper's constructor (speechbrain's `PitWrapper(cal_si_snr)`,
whose `get_mask` holds the break at nnet/losses.py:1195), `self.method` handed as a callback.
They are linted as reached, as a direct call would be. A function handed to
`torch.compiler.disable` or registered as a hook does not run in the caller's graph: not reached."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, dynamo_graphs, lines, load_snippet

SOURCE = """
    import functools

    import torch
    from torch import nn


    def first_count(x: torch.Tensor):
        return x[: int(x.sum())]


    def doubled_sum(x):
        n = x.sum().item()
        return x * n


    def scaled(x: torch.Tensor, k):
        if x.max() > k:
            return x / k
        return x


    def quiet(x):
        if x.sum() > 0:
            return x
        return -x


    def configure(default, site):
        if site["is_observed"]:
            return {}
        return {"enumerate": default}


    class Wrapper(nn.Module):
        def __init__(self, loss):
            super().__init__()
            self.loss = loss

        def forward(self, x):
            return self.loss(x)


    class Model(nn.Module):
        def forward(self, x):
            part = functools.partial(scaled, k=2.0)
            ys = list(map(doubled_sum, [x, x + 1]))
            z = Wrapper(first_count)(x)
            w = self.apply_to(self.shift, x)
            self.register_forward_hook(quiet)
            self.config = functools.partial(configure, "parallel")
            return part(x) + ys[0] + ys[1] + z.sum() + w

        def apply_to(self, fn, x):
            return fn(x)

        def shift(self, x):
            return x + x.mean().item()
"""


def test_handed_functions_are_reached():
    # A handed function's parameters are tensors only by annotation: the call it is handed to
    # passes what it likes (`configure`'s `site` is a dict: its `if` is not flagged).
    assert lines(SOURCE, "FL101") == [9, 13, 58]  # first_count, doubled_sum, Model.shift
    assert lines(SOURCE, "FL102") == [18]  # scaled; `quiet` is a hook: never run in this call


def test_dynamo_breaks_in_each_handed_function():
    torch = pytest.importorskip("torch")
    namespace = load_snippet(SOURCE)
    model = namespace["Model"]()
    model.register_forward_hook = lambda hook: None  # the hook would run after forward, eagerly
    x = torch.rand(4) + 0.5
    graphs, eager, compiled = dynamo_graphs(model, x)
    assert graphs > 1
    assert torch.allclose(eager, compiled)
    for name, args in (("first_count", (x,)), ("doubled_sum", (x,)), ("scaled", (x, 2.0))):
        assert dynamo_break_reasons(namespace[name], *args), name
