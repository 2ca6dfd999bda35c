"""A warning that an argument the caller passed is ignored or does nothing here is a misuse path,
in the words real pipelines use (seed 28: diffusers' qwenimage "guidance_scale is passed as ..., but
ignored since the model is not guidance-distilled", "Passing `scale` ... is ineffective"). A note on
the data stays on the normal path."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

from fuselint.source.paths import off_path

SRC = """
import logging

import torch

logger = logging.getLogger(__name__)


class Model(torch.nn.Module):
    def forward(self, x, guidance_scale=None, scale=None, mode=None):
        if guidance_scale is not None:
            logger.warning(f"guidance_scale is passed as {guidance_scale}, but ignored since the model is not distilled.")
        if scale is not None:
            logger.warning("Passing `scale` without the backend is ineffective.")
        if mode is not None:
            logger.warning("The mode argument has no effect on this model.")
        if x.shape[-1] % 8:
            logger.warning("The sequence length is not a multiple of 8: it runs slower.")
        return x * 2
"""


def test_ignored_or_ineffective_arguments_are_misuse_paths_and_a_note_on_the_data_is_not():
    got = {f.span.line: off_path(f) for f in findings(SRC, "FL103") if f.code == "FL103"}
    assert got == {12: "misuse", 14: "misuse", 16: "misuse", 18: None}


def test_dynamo_breaks_only_when_the_argument_is_passed():
    torch = pytest.importorskip("torch")
    model = load_snippet(SRC)["Model"]()
    x = torch.ones(2, 8)
    assert dynamo_break_reasons(model, x) == []
    assert dynamo_break_reasons(model, x, None, 2.0) != []
