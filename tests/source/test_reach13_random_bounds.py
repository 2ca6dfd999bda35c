"""FL108: Python's `random.randint`, `randrange` and `uniform` trace while their bounds are Python
numbers (judge10's and review12's dynamo facts), and dynamo skips them (gb0007, "Attempted to call
function marked as skipped") when a bound is a tensor. Flagged only then; the drawing functions
that never trace (`random.random`, `choice`, ...) stay flagged whatever their arguments."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, lines

SOURCE = """
    import random

    import torch
    from torch import nn


    class Draws(nn.Module):
        def forward(self, x, k: int):
            n = torch.randint(1, 3, (1,))
            a = random.randint(0, k)
            b = random.randrange(1, x.shape[0])
            c = random.randint(0, n)
            d = random.uniform(0.0, x.sum())
            e = random.randrange(len(x))
            return x[a:] * b + c + d + e
"""


def test_only_tensor_bounds_are_flagged():
    assert lines(SOURCE, "FL108") == [13, 14]


def test_dynamo_skips_the_draw_only_with_a_tensor_bound():
    import random

    torch = pytest.importorskip("torch")
    x = torch.ones(5)
    skipped = ["Attempted to call function marked as skipped"]
    assert dynamo_break_reasons(lambda x, k: x * random.randint(0, k), x, 3) == []
    assert dynamo_break_reasons(lambda x: x * random.randrange(1, x.shape[0]), x) == []
    assert dynamo_break_reasons(lambda x: x + random.randint(0, torch.randint(1, 3, (1,))), x) == skipped
    assert dynamo_break_reasons(lambda x: x + random.uniform(0.0, x.sum()), x) == skipped
