"""The false class judge10 found on speechbrain 1.1.2 (bench/results/precision_untuned10.md, #s22,
#s37): a parameter of an entry with no annotation, no default and no caller in the lint is guessed a
tensor, though its docstring states a Python scalar (`current_epoch: int`, `S : int`). A type stated
in the docstring, numpydoc, Google or Sphinx style, now counts as an annotation would, for the
scalars `int`, `float`, `bool` and `str` only: a container (`targets : tuple`, which holds tensors),
a tensor type and prose decide nothing. Dynamo (torch 2.13) traces each cleared function in one
graph when handed the documented scalar; the look-alike handed a tensor breaks."""

from __future__ import annotations

import ast
import textwrap

import pytest
from source_rules_helpers import breaks_under_dynamo, lines

from fuselint.source.docstring_types import documented_host_params


def _run(source: str, name: str):
    namespace: dict = {}
    exec(compile(textwrap.dedent(source), "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    return namespace[name]


# speechbrain's FastSpeech2 loss (`current_epoch: int`), ReSepFormer's memory RNN (`S : int`, here
# in Google style) and InputNormalization's `epoch : int, optional` (here in Sphinx style), cut down;
# then look-alikes whose docstrings state a tensor, a container, or nothing but prose.
SOURCE = '''
    import torch
    from torch import nn


    class Loss(nn.Module):
        def __init__(self, max_epochs=10):
            super().__init__()
            self.max_epochs = max_epochs

        def forward(self, pred, target, current_epoch):
            """Loss.

            Arguments
            ---------
            pred : torch.Tensor
                Predictions.
            target : torch.Tensor
                Targets.
            current_epoch: int
                The epoch.
            """
            loss = (pred - target).abs().mean()
            if current_epoch > self.max_epochs:
                loss = loss * 0
            return loss


    class Memory(nn.Module):
        def forward(self, hc, S):
            """Memory.

            Args:
                hc (tuple): hidden and cell states, each (d, B*S, H).
                S (`int`): the number of chunks.
            """
            h, c = hc
            d, BS, H = h.shape
            B = BS // S
            h = h.transpose(1, 0).contiguous().view(B, S, d * H)
            return h.view(B * S, d, H).transpose(1, 0), c


    class Norm(nn.Module):
        def __init__(self, until=3):
            super().__init__()
            self.until = until

        def forward(self, x, epoch=None):
            """Normalize.

            :param x: the input
            :type epoch: int, optional
            """
            if epoch is None or epoch < self.until:
                x = x * 2
            return x


    class TensorEpoch(nn.Module):
        def __init__(self, until=3):
            super().__init__()
            self.until = until

        def forward(self, pred, current_epoch):
            """Arguments
            ---------
            current_epoch : torch.Tensor
                The epoch, a 0-d tensor.
            """
            if current_epoch > self.until:
                pred = pred * 0
            return pred


    class Pair(nn.Module):
        def forward(self, targets, lengths):
            """Arguments
            ---------
            targets : tuple
                (mel, pitch)
            lengths : list
                Lengths.
            """
            mel, pitch = targets
            return mel[0, : lengths[0]].sum() + pitch.sum()


    class Prose(nn.Module):
        def __init__(self, until=3):
            super().__init__()
            self.until = until

        def forward(self, x, k):
            """k: the count of the steps"""
            if k > self.until:
                x = x * 2
            return x
'''


def test_documented_scalars_clear_the_guess():
    # main flagged 24 (`current_epoch`), 40 and 41 (`B` from `BS // S`) and 55 (`epoch`); 71 (a
    # documented tensor), 86 (`lengths : list`) and 96 (prose) stay.
    assert lines(SOURCE, "FL102") == [71, 96]
    assert lines(SOURCE, "FL101") == [86]


def test_documented_scalars_trace_and_a_tensor_breaks():
    torch = pytest.importorskip("torch")
    x = torch.randn(4)
    assert not breaks_under_dynamo(_run(SOURCE, "Loss")(), x, x, 3)
    h = torch.randn(1, 6, 2)
    assert not breaks_under_dynamo(_run(SOURCE, "Memory")(), (h, h), 3)
    assert not breaks_under_dynamo(_run(SOURCE, "Norm")(), x, 2)
    assert breaks_under_dynamo(_run(SOURCE, "Loss")(), x, x, torch.tensor(3))
    assert breaks_under_dynamo(_run(SOURCE, "TensorEpoch")(), x, torch.tensor(5))


@pytest.mark.parametrize(
    ("doc", "host"),
    [
        ("n : int\n    Count.", True),
        ("n: int, optional\n    Count.", True),
        ("n : int or None", True),
        ("n (`int`, *optional*, defaults to 3): count.", True),
        (":type n: bool", True),
        (":param float n: the rate", True),
        ("n : torch.Tensor or int", False),
        ("n : tuple", False),
        ("n : list of int", False),
        ("n : speechbrain.Stage", False),
        ("n: the count of steps", False),
        ("m : int", False),
    ],
)
def test_stated_types(doc, host):
    doc_lines = "\n    ".join(doc.splitlines())
    node = ast.parse(f'def f(x, n):\n    """Doc.\n\n    {doc_lines}\n    """\n').body[0]
    assert (documented_host_params(node, ["n"]) == {"n"}) is host
