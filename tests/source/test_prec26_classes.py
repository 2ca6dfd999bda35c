"""prec26: false and unmarked classes of the seed-24/25 precision samples (bench/results/
real_breaks_precision.md), each fixed by a general rule and checked against dynamo.

- A nested def's parameter that only receives a parameter of the enclosing function which the lint
  holds no tensor (`height: int`) is none either: `between(x)` given `height` (diffusers kandinsky5
  i2v:219, `return 480 <= x <= 854`, was FL102).
- A parameter guessed to be a tensor from its name alone stays a guess in a nested def that is only
  handed on (a collate function), and in a helper that only receives such guesses: a loop over it
  may be a loop over a Python list (transformers pipelines/base.py:115, `_pad`'s `items`, was FL107).
"""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, dynamo_graphs, lines, load_snippet

SCALES = """
import torch
from torch import nn


class Scaler(nn.Module):
    def scale_factor(self, height: int, width: int):
        def between(x):
            return 480 <= x <= 854

        if between(height) and between(width):
            return 2.0
        return 3.0

    def masked_factor(self, mask):
        def between(x):
            return 480 <= x <= 854

        return 2.0 if between(mask.sum()) else 3.0

    def forward(self, x, height: int = 512, width: int = 768):
        return x * self.scale_factor(height, width) * self.masked_factor(x > 0)
"""


def test_a_nested_def_given_an_int_parameter_holds_no_tensor():
    # line 9 is `480 <= x <= 854` given `height: int`; line 17 the same given a mask's sum
    assert lines(SCALES, "FL102") == [17]


def test_dynamo_breaks_on_the_nested_comparison_only_when_it_is_handed_a_tensor():
    torch = pytest.importorskip("torch")
    module = load_snippet(SCALES)["Scaler"]()
    assert dynamo_break_reasons(module.scale_factor, 512, 768) == []
    assert dynamo_break_reasons(module.masked_factor, torch.ones(600) > 0) != []


COLLATE = """
import torch
from torch import nn


def pad_rows(items, key, value):
    width = max(item[key].shape[1] for item in items)
    out = torch.full((len(items), width), value)
    for i, item in enumerate(items):
        out[i, : item[key].shape[1]] = item[key][0]
    return out


def pad_collate(value):
    def collate(items):
        keys = set(items[0].keys())
        for item in items:
            if set(item.keys()) != keys:
                raise ValueError("keys differ")
        return {key: pad_rows(items, key, value) for key in keys}

    return collate


def row_sums(rows):
    out = []
    for row in rows:
        out.append(row.sum())
    return out


class Batcher(nn.Module):
    def forward(self, items, x):
        return pad_collate(0)(items), row_sums(x * 2), row_sums(x)
"""


def test_a_guessed_list_of_dicts_is_no_tensor_loop_in_a_handed_on_def_and_its_helper():
    # `for ... in items` (collate, handed on) and `enumerate(items)` (pad_rows, handed only the
    # guess) are not flagged; `row_sums(x * 2)` hands a tensor the code computed: flagged
    assert lines(COLLATE, "FL107") == [27]


def test_dynamo_compiles_the_list_loop_in_one_graph():
    torch = pytest.importorskip("torch")
    ns = load_snippet(COLLATE)
    items = [{"ids": torch.ones(1, n)} for n in (2, 3, 4)]
    graphs, eager, compiled = dynamo_graphs(ns["pad_collate"](0), items)
    assert graphs == 1 and torch.equal(eager["ids"], compiled["ids"])
    assert dynamo_break_reasons(ns["pad_collate"](0), items) == []
