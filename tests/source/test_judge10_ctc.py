"""A missed class judge10 found on speechbrain 1.1.2 (bench/results/precision_untuned10.md,
nnet/losses.py:264): the CTC loss. `aten._ctc_loss` returns its alignment table sized by the
longest target length's value, and dynamo (torch 2.13) breaks at `F.ctc_loss` and at an
`nn.CTCLoss` module's call (gb0036, "Dynamic shape operator"), whether the lengths are tensors or
tuples of ints. FL106 flags the function, an `nn.CTCLoss` the class stores, and one built in place;
another loss module stays quiet."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import breaks_under_dynamo, lines

SOURCE = """
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Functional(nn.Module):
        def forward(self, log_probs, targets, input_lengths, target_lengths):
            return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)


    class Stored(nn.Module):
        def __init__(self):
            super().__init__()
            self.ctc = nn.CTCLoss(zero_infinity=True)
            self.mse = nn.MSELoss()

        def forward(self, log_probs, targets, input_lengths, target_lengths):
            return self.ctc(log_probs, targets, input_lengths, target_lengths) + self.mse(log_probs, log_probs)


    class Inline(nn.Module):
        def forward(self, log_probs, targets, input_lengths, target_lengths):
            return nn.CTCLoss()(log_probs, targets, input_lengths, target_lengths)


    class Mse(nn.Module):
        def __init__(self):
            super().__init__()
            self.mse = nn.MSELoss()

        def forward(self, log_probs, targets, input_lengths, target_lengths):
            return self.mse(log_probs, log_probs)
"""


def _run(name: str):
    namespace: dict = {}
    exec(compile(textwrap.dedent(SOURCE), "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    return namespace[name]()


def test_ctc_loss_flagged():
    assert lines(SOURCE, "FL106") == [9, 19, 24]


@pytest.mark.parametrize("lengths", ["tensors", "ints"])
def test_ctc_loss_breaks_and_another_loss_traces(lengths):
    torch = pytest.importorskip("torch")
    log_probs = torch.randn(20, 2, 10).log_softmax(-1)
    targets = torch.randint(1, 10, (2, 6))
    sizes = (torch.tensor([20, 15]), torch.tensor([6, 4])) if lengths == "tensors" else ((20, 15), (6, 4))
    for name in ("Functional", "Stored", "Inline"):
        assert breaks_under_dynamo(_run(name), log_probs, targets, *sizes), name
    assert not breaks_under_dynamo(_run("Mse"), log_probs, targets, *sizes)
