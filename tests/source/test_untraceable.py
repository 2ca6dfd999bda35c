"""FL108: constructs dynamo does not trace (checked against dynamo in rules/FL108.toml's terms)."""

from __future__ import annotations

from source_rules_helpers import lines

METHOD = """
import torch
from torch import nn

class Cached(nn.Module):
    @torch.compiler.disable
    def lookup(self, x):
        return x

    def forward(self, x):
        y = self.lookup(x)
        return y * 2
"""


def test_a_call_to_a_disabled_method_is_flagged():
    assert lines(METHOD, "FL108") == [11]


def test_a_device_context_is_flagged_but_no_grad_is_not():
    source = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x):
        with torch.no_grad(), torch.device("cpu"):
            y = torch.zeros(3)
        return x + y
"""
    assert lines(source, "FL108") == [7]
