"""reach23: two kinds the dataflow now knows, from kornia's SOLD2 line detector (break sites
sold2_detector.py:312 and :481 of bench/real_breaks.py), each checked against dynamo.

- The product (or sum) of two boolean tensors is a boolean tensor (torch: `a * b` is `a & b`), so
  indexing with it has a data-dependent shape (FL106), as indexing with `a & b` has.
- `torch.argmax(t)` (the function form of `t.argmax()`: one tensor, no dim) is a 0-d tensor computed
  in the graph, and indexing a tensor with it reads its value on the host (FL101, gb0033).
"""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, lines, load_snippet

SRC = """
import torch
from torch import nn


def product_mask(x, scores, ratio):
    keep = scores > 0.5
    if ratio > 0:
        keep = keep * (scores < 0.9)
    return x[keep]


def number_times_mask(x, scores):
    weight = (scores > 0.5) * 2
    return x[weight]


def function_argmax(x, scores):
    best = torch.argmax(scores)
    return x[best][None]


def argmax_over_a_dim(x, scores):
    best = torch.argmax(scores, dim=0)
    return x[best]


class Detector(nn.Module):
    def forward(self, x, scores):
        return (
            product_mask(x, scores, 1),
            number_times_mask(x, scores),
            function_argmax(x, scores),
            argmax_over_a_dim(x, scores),
        )
"""


def test_indexing_with_a_product_of_masks_is_a_data_dependent_shape():
    assert lines(SRC, "FL106") == [10]


def test_indexing_with_the_function_form_of_argmax_reads_the_host():
    # not `torch.argmax(scores, dim=0)`: 0-d only when `scores` is 1-d, which the code does not show
    assert lines(SRC, "FL101") == [20]


def test_dynamo_breaks_where_the_findings_are_and_not_on_their_look_alikes():
    torch = pytest.importorskip("torch")
    ns = load_snippet(SRC)
    x, scores = torch.randn(6, 4), torch.tensor([0.95, 0.1, 0.8, 0.2, 0.7, 0.3])
    assert "Dynamic shape operator" in dynamo_break_reasons(ns["product_mask"], x, scores, 1)
    assert "Data dependent operator" in dynamo_break_reasons(ns["function_argmax"], x, scores)
    # an int tensor (bool times a number) is no mask: it gathers rows, with a static shape
    assert dynamo_break_reasons(ns["number_times_mask"], x, scores) == []
