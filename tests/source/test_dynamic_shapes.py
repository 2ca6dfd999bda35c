"""FL106: data-dependent output shapes, and their static look-alikes."""

from __future__ import annotations

from source_rules_helpers import lines

SRC = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, scores, ids, counts, valid: torch.BoolTensor, attention_mask=None):
        a = torch.nonzero(scores > 0.5)
        b = x[scores > 0.5]
        keep = scores.sigmoid() > 0.3
        c = x[:, keep]
        d = torch.unique(ids)
        e = ids.bincount()
        f = torch.masked_select(x, keep)
        g = torch.where(keep)
        h = torch.repeat_interleave(x, counts, dim=0)
        i = x.repeat_interleave(counts.long())
        j = x[valid]
        return a, b, c, d, e, f, g, h, i, j


class Static(nn.Module):
    def forward(self, x, scores, attention_mask, index, counts):
        keep = scores > 0.5
        a = torch.where(keep, x, torch.zeros_like(x))
        b = x.masked_fill(~keep, 0.0)
        x[keep] = 0.0
        c = x[index]
        d = x[attention_mask]
        e = x.repeat_interleave(2, dim=0)
        f = torch.repeat_interleave(x, 3)
        g = x[:, : x.shape[1] // 2]
        h = scores.topk(5).indices
        i = torch.repeat_interleave(x, counts, dim=0, output_size=8)  # the caller states the length
        j = x.repeat_interleave(counts, output_size=x.shape[0] * 2)
        return a, b, c, d, e, f, g, h, i, j
"""


def test_dynamic_shape_ops_are_flagged():
    assert lines(SRC, "FL106") == [7, 8, 10, 11, 12, 13, 14, 15, 16, 17]


def test_static_shape_look_alikes_are_not_flagged():
    assert [line for line in lines(SRC, "FL106") if line > 20] == []
