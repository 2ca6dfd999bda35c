"""FL108: a call retried under `except TypeError` with other arguments (speechbrain 1.1.2's
lobes/models/Xvector.py:112, `try: x = layer(x, lengths=lens)` / `except TypeError: x = layer(x)`).
dynamo (torch 2.13) cannot raise the TypeError of a failed argument binding inside the graph: where
a layer does not take `lengths` it breaks at the call (gb7312, "failed to bind arguments when
attempting to inline"). Every layer taking the keyword traces, and so does a TypeError that the
callee raises itself; a `try` whose handler does not call the same callee again is left alone."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, lines, load_snippet

SOURCE = """
    import torch
    from torch import nn


    class Takes(nn.Module):
        def forward(self, x, lengths=None):
            return x + 1


    class Plain(nn.Module):
        def forward(self, x):
            return x * 2


    class Blocks(nn.Module):
        def __init__(self, blocks):
            super().__init__()
            self.blocks = nn.ModuleList(blocks)

        def forward(self, x, lens):
            for layer in self.blocks:
                try:
                    x = layer(x, lengths=lens)
                except (TypeError, ValueError):
                    x = layer(x)
            return x


    class Raises(nn.Module):
        def forward(self, x):
            try:
                y = torch.relu(x)
                raise TypeError("fallback")
            except TypeError:
                y = x + 2
            return y
"""


def test_the_retried_call_is_flagged():
    assert lines(SOURCE, "FL108") == [24]


def test_dynamo_breaks_only_where_the_arguments_do_not_bind():
    torch = pytest.importorskip("torch")
    ns = load_snippet(SOURCE)
    x, lens = torch.rand(3), torch.ones(3)
    assert dynamo_break_reasons(ns["Blocks"]([ns["Takes"](), ns["Plain"]()]), x, lens) == [
        "failed to bind arguments when attempting to inline"
    ]
    assert dynamo_break_reasons(ns["Blocks"]([ns["Takes"](), ns["Takes"]()]), x, lens) == []
    assert dynamo_break_reasons(ns["Raises"](), x) == []
