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
from source_rules_helpers import dynamo_break_reasons, dynamo_graphs, findings, lines, load_snippet

from fuselint.source.paths import off_path

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


TRUNCATION = """
import logging

import torch
from torch import nn

logger = logging.getLogger("prec26")


def is_bs4_available():
    return False


class TextEncoder(nn.Module):
    def encode(self, prompt_ids, max_length: int = 8):
        text_input_ids = prompt_ids[:, :max_length]
        if text_input_ids.shape[-1] < max_length:
            pad = torch.zeros(1, max_length - text_input_ids.shape[-1], dtype=prompt_ids.dtype)
            text_input_ids = torch.cat([text_input_ids, pad], dim=-1)
        untruncated_ids = prompt_ids
        if untruncated_ids.shape[-1] >= text_input_ids.shape[-1] and not torch.equal(text_input_ids, untruncated_ids):
            logger.warning(
                "The following part of your input was truncated because CLIP can only handle sequences up to"
                f" {max_length} tokens"
            )
        return text_input_ids * 2

    def encode_unguarded(self, prompt_ids, max_length: int = 8):
        text_input_ids = prompt_ids[:, :max_length]
        if not torch.equal(text_input_ids, prompt_ids):
            logger.warning("The following part of your input was truncated because it is too long")
        return text_input_ids * 2

    def encode_data_warning(self, prompt_ids, max_length: int = 8):
        text_input_ids = prompt_ids[:, :max_length]
        if prompt_ids.shape[-1] >= max_length and not torch.equal(text_input_ids, prompt_ids):
            logger.warning("Some tokens differ")
        return text_input_ids * 2

    def preprocess(self, ids, clean_caption=False):
        if clean_caption and not is_bs4_available():
            logger.warning("Setting `clean_caption` to False...")
        return ids * 2

    def noised(self, ids, addnoise_condition=0):
        if addnoise_condition > 60:
            logger.warning(f"The value of 'addnoise_condition' is too large ({addnoise_condition}).")
        return ids * 2

    def forward(self, prompt_ids):
        return (
            self.encode(prompt_ids),
            self.encode_unguarded(prompt_ids),
            self.encode_data_warning(prompt_ids),
            self.preprocess(prompt_ids, True),
            self.noised(prompt_ids, 80),
        )
"""


def _paths(source: str, code: str) -> dict[int, str | None]:
    return {f.span.line: off_path(f) for f in findings(source, code) if f.code == code}


def test_a_size_guarded_read_under_a_truncation_warning_is_on_its_misuse_path():
    # the size-guarded `torch.equal` (21) and its warning (22) are on the side road; the same read
    # without the size guard (30) runs on every call, and one under a warning about the data (36)
    # names no side road: both stay on the normal path. A warning that an optional package is
    # missing (42) or that an argument is too large (47) is a misuse path too.
    assert _paths(TRUNCATION, "FL102") == {21: "misuse", 30: None, 36: None}
    assert _paths(TRUNCATION, "FL103") == {22: "misuse", 31: "misuse", 37: None, 42: "misuse", 47: "misuse"}


def test_dynamo_breaks_on_the_truncation_check_only_for_an_over_long_prompt():
    torch = pytest.importorskip("torch")
    encoder = load_snippet(TRUNCATION)["TextEncoder"]()
    assert dynamo_break_reasons(encoder.encode, torch.ones(1, 5, dtype=torch.long)) == []
    assert dynamo_break_reasons(encoder.encode, torch.ones(1, 12, dtype=torch.long)) != []
    # unguarded, the read runs for a short prompt too
    assert dynamo_break_reasons(encoder.encode_unguarded, torch.ones(1, 5, dtype=torch.long)) != []


def test_dynamo_breaks_on_a_missing_package_or_out_of_range_warning_only_on_that_path():
    torch = pytest.importorskip("torch")
    encoder = load_snippet(TRUNCATION)["TextEncoder"]()
    ids = torch.ones(1, 4)
    assert dynamo_break_reasons(encoder.preprocess, ids, False) == []
    assert dynamo_break_reasons(encoder.preprocess, ids, True) != []
    assert dynamo_break_reasons(encoder.noised, ids, 20) == []
    assert dynamo_break_reasons(encoder.noised, ids, 80) != []
