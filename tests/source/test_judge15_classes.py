"""judge15's classes (stable-baselines3 2.9.2, held out by judge14; see
bench/results/precision_untuned15.md), each checked against dynamo (torch 2.13):

1. A training step compiled whole: an optimizer's `step()` (gb0025: torch's step calls
   `torch._dynamo.graph_break()`), its `zero_grad()` (marked `torch._disable_dynamo`), an lr
   scheduler's `step()` and `loss.backward()` each end the graph (FL108). `clip_grad_norm_` and
   `module.zero_grad()` trace, and a diffusers-style `scheduler.step(out, t, x)` is no optimizer.
2. numpy on the arrays a configuration object holds (`np.any(space.low != 0)`): dynamo wraps the
   arrays as tensors, so an `or`, an `if` on the result is a data-dependent branch (FL102, gb0170).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, lines, logged_break_lines

from fuselint.config import Config
from fuselint.source.lint import lint_text

BREAKS = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"


def _found(name: str, **settings) -> dict[int, str]:
    text = (BREAKS / name).read_text()
    config = Config(select=("FL1",), **settings)
    return {f.span.line: f.code for f in lint_text(name, text, CATALOG, config)}


def _load(name: str) -> dict:
    path = BREAKS / name
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own fixture
    return namespace


def test_each_update_call_of_a_compiled_training_step_is_flagged():
    found = _found("train_step.py", traced_functions=("Trainer.train",))
    # zero_grad, backward, step, the scheduler's step; not clip_grad_norm_ (line 33)
    assert found == {30: "FL108", 32: "FL108", 34: "FL108", 35: "FL108"}


def test_dynamo_breaks_on_each_update_call():
    torch = pytest.importorskip("torch")
    trainer = _load("train_step.py")["Trainer"]()
    broke = logged_break_lines(
        trainer.train, torch.randn(4, 8), torch.randn(4, 1), filename=str(BREAKS / "train_step.py")
    )
    assert broke == set(_found("train_step.py", traced_functions=("Trainer.train",)))


LOOK_ALIKES = """
    import torch
    from torch import nn


    class Sampler(nn.Module):
        def forward(self, x, t):
            self.zero_grad()
            torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
            return self.scheduler.step(x, t, x).prev_sample


    class Stepper(nn.Module):
        def forward(self, x):
            self.optimizer.step()
            return x
"""


def test_module_zero_grad_clipping_and_a_sampling_step_stay_quiet():
    assert lines(LOOK_ALIKES, "FL108") == [15]


def test_dynamo_traces_module_zero_grad_and_clipping():
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(3, 2)

    def step(x):
        model.zero_grad()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return model(x)

    assert logged_break_lines(step, torch.randn(2, 3), filename=__file__) == set()


def test_numpy_on_a_space_s_bounds_is_flagged_on_every_jump():
    found = _found("space_bounds.py")
    # the `or` operand and the `if` of the image check, the `if np.all(...)` of the forward
    assert found == {24: "FL102", 25: "FL102", 39: "FL102"}


def test_dynamo_breaks_on_numpy_of_the_space_s_bounds():
    torch = pytest.importorskip("torch")
    model = _load("space_bounds.py")["Preprocess"]().eval()
    broke = logged_break_lines(model, torch.rand(2, 3, 8, 8), filename=str(BREAKS / "space_bounds.py"))
    assert broke == set(_found("space_bounds.py"))


NUMBERS = """
    import numpy as np
    from torch import nn


    class Net(nn.Module):
        def forward(self, x, names):
            if np.any(x.shape):
                x = x + 1
            if len(self.space.shape) == 3:
                x = x * 2
            if self.space.dtype != np.uint8:
                return x
            return x.sum(0)
"""


def test_a_space_s_shape_and_dtype_are_no_numpy_values():
    # `np.any` of a shape is a numpy value (FL102, line 8); reading a space's shape is Python
    assert lines(NUMBERS, "FL102") == [8]
