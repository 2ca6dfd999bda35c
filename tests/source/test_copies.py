"""FL402: clones that nothing needs, and the many ways a clone is needed."""

from __future__ import annotations

import pytest
from source_rules_helpers import fixed, lines

TEMPLATE = """
import torch
import torch.nn.functional as F
from torch import nn

class M(nn.Module):
    def forward(self, x):
        x = x * 2
        y = x.clone()
        {between}
        return x + y
"""


def test_clone_of_an_unmutated_tensor_is_flagged_and_fixed():
    src = TEMPLATE.format(between="x = torch.tanh(x) + y.sum()")
    assert lines(src, "FL402") == [9]
    assert "        y = x\n" in fixed(src, "FL402")


@pytest.mark.parametrize(
    "between",
    [
        "x.add_(1)",
        "y.mul_(2)",
        "x[0] = 0",
        "y += 1",
        "torch.add(x, 1, out=x)",
        "x = F.relu(x, inplace=True)",
        "x = self.act(x)",
        "z = helper(y)",
        "self.cache = y",
        "return y",
    ],
)
def test_clone_that_protects_against_a_write_or_escape_is_not_flagged(between):
    assert lines(TEMPLATE.format(between=between), "FL402") == []
