"""prec31: false classes of the audiocraft/darts census (bench/results/precision_untuned31.md) and of the
seed-29 and seed-30 samples (bench/results/real_breaks_precision.md), each fixed by a general reading and
checked against dynamo (torch 2.13) on fixtures/breaks/condition_copies.py.

- `copy.deepcopy` breaks only on a tensor inside the copied value; a parameter annotated with host types
  only (`List[Optional[str]]`) is copied without a break (audiocraft's `WhiteSpaceTokenizer`).
- A loop over dim 1 whose loop variable is named a channel or class (`for c in range(x.size(1))`) runs
  over the model's channels: the same graph at every batch (diffusers' LTX-2 AdaIN).
- A warning that an argument is overridden ("The `use_cache` argument is changed to `False` ...") under a
  test of a parameter that defaults to None and that the function leaves as passed runs only for a
  caller who passed it: a misuse road (transformers' BART family with labels).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from source_rules_helpers import dynamo_break_reasons, dynamo_graphs, findings, lines

from fuselint.source.paths import MISUSE, off_path

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "condition_copies.py"


@pytest.fixture
def fixture(monkeypatch) -> types.ModuleType:
    """The fixture file run as a module, importable by name while the test runs (dynamo looks a
    logger's module up in `sys.modules`)."""
    module = types.ModuleType("condition_copies")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(FIXTURE.read_text(), str(FIXTURE), "exec"), module.__dict__)  # noqa: S102 - our own fixture
    return module


def test_fixture_findings_sit_on_the_lines_dynamo_breaks_or_unrolls_on():
    found = {f.span.line: (f.code, off_path(f)) for f in findings(FIXTURE.read_text(), "FL1")}
    assert found == {39: ("FL104", None), 59: ("FL107", None), 77: ("FL103", MISUSE), 95: ("FL103", None)}


def test_a_copy_of_host_strings_does_not_break_and_a_copy_holding_a_tensor_does(fixture):
    torch = pytest.importorskip("torch")
    x = torch.ones(2)
    assert dynamo_break_reasons(fixture.Conditioner(), x, ["a song", None]) == []
    dropout = fixture.ConditionDropout().train()
    assert dynamo_break_reasons(dropout, x, [fixture.WavCondition(torch.ones(3), 3)]) != []


def test_a_channel_loop_gives_the_same_graph_at_every_batch(fixture):
    torch = pytest.importorskip("torch")
    norm = fixture.ChannelNorm()
    counts = []
    for batch in (2, 4):
        graphs, eager, compiled = dynamo_graphs(norm, torch.randn(batch, 4, 5))
        counts.append(graphs)
        torch.testing.assert_close(compiled, eager)
    assert counts == [1, 1]


def test_the_override_warning_breaks_only_for_a_caller_who_passed_the_argument(fixture):
    torch = pytest.importorskip("torch")
    x, labels = torch.randn(2, 4), torch.randn(2, 4)
    head = fixture.Seq2SeqHead()
    assert dynamo_break_reasons(lambda a, b: head(a, labels=b), x, labels) == []
    assert dynamo_break_reasons(lambda a, b: head(a, labels=b, use_cache=True), x, labels) != []
    configured = fixture.ConfiguredHead()
    assert dynamo_break_reasons(lambda a, b: configured(a, labels=b), x, labels) != []


HOST_ANNOTATIONS = """
import copy
import typing as tp
from typing import Dict, List, Optional

import torch
from torch import nn


class M(nn.Module):
    def forward(self, x, texts: tp.List[tp.Optional[str]], names: "list[str]", sizes: Dict[str, int],
                items: list, cache: Optional[List[torch.Tensor]] = None, spec: dict = None):
        texts = copy.deepcopy(texts)
        a = copy.deepcopy(names)
        b = copy.deepcopy(sizes)
        c = copy.deepcopy(items)
        d = copy.deepcopy(cache)
        e = copy.deepcopy(spec)
        names = [x]
        f = copy.deepcopy(names)
        return x
"""


def test_deepcopy_of_a_parameter_annotated_with_host_types_only_is_not_flagged():
    # a bare `list`/`dict` may hold tensors, a tensor list does, and a rebound name is no longer
    # what the annotation says
    assert lines(HOST_ANNOTATIONS, "FL104") == [16, 17, 18, 20]


OVERRIDES = """
import logging
import torch
from torch import nn

logger = logging.getLogger(__name__)


class M(nn.Module):
    def forward(self, x, labels=None, use_cache=None, return_dict=True, output_attentions=False):
        if labels is not None:
            if use_cache:
                logger.warning("The `use_cache` argument is changed to `False` since `labels` is provided.")
            if return_dict:
                logger.warning("The `return_dict` argument is changed to `False` since `labels` is provided.")
            if output_attentions:
                logger.warning("Attentions are returned for the labelled tokens.")
        return x
"""


def test_an_override_warning_is_a_misuse_road_only_under_a_parameter_left_as_passed():
    # `return_dict` defaults to True (every call warns); a warning not about an override stays normal
    paths = {f.span.line: off_path(f) for f in findings(OVERRIDES, "FL103")}
    assert paths == {13: MISUSE, 15: None, 17: None}


LIMITS = """
import logging
import warnings
import torch
from torch import nn

logger = logging.getLogger(__name__)


class M(nn.Module):
    def forward(self, x, boxes, input_ids=None, input_features=None, max_objs=30):
        if len(boxes) > max_objs:
            warnings.warn(f"More that {max_objs} objects found. Only first {max_objs} objects will be processed.")
        if input_features is not None and input_ids is not None:
            logger.warning("Make sure that `input_features` and `input_ids` are mutually exclusive.")
        if len(boxes) > 3:
            logger.warning("Only the first token is used for pooling.")
        return x
"""


def test_warnings_that_an_input_is_cut_or_two_arguments_exclude_each_other_are_misuse_roads():
    # seed 31 #42 (GLIGEN's box limit) and #39 (seamless_m4t's input_ids with input_features); a note
    # about what the model does with every input stays normal
    paths = {f.span.line: off_path(f) for f in findings(LIMITS, "FL103")}
    assert paths == {13: MISUSE, 15: MISUSE, 17: None}
