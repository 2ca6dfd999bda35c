"""A docstring's `Returns`, `Yields` and `Attributes` entries name values that are not the
parameters, though they may reuse a parameter's name (speechbrain writes `lengths : int` under
`Returns` for a forward whose `lengths` argument is a tensor). Only parameter lines type a
parameter: before any section header, in `Parameters` / `Arguments` / `Args` sections, and Sphinx
`:type` / `:param` lines."""

from __future__ import annotations

import ast

import pytest
from source_rules_helpers import breaks_under_dynamo, lines, load_snippet

from fuselint.source.docstring_types import documented_host_params

SOURCE = '''
    import torch
    from torch import nn


    class Crop(nn.Module):
        def forward(self, x, lengths):
            """Crop.

            Arguments
            ---------
            x : torch.Tensor
                The batch.

            Returns
            -------
            lengths : int
                The longest length.
            """
            if lengths.max() > 2:
                x = x * 2
            return x


    class Step(nn.Module):
        def forward(self, x, step):
            """Step.

            Arguments
            ---------
            x : torch.Tensor
                The batch.
            step : int
                The step counter.

            Returns
            -------
            x : torch.Tensor
            """
            if step > 2:
                x = x * 2
            return x
'''


def _run(source: str, name: str):
    return load_snippet(source)[name]


def test_a_returns_entry_does_not_type_the_parameter():
    # `lengths` is documented only under Returns: still guessed a tensor (line 20); `step` is
    # documented under Arguments: a host int (line 40 stays quiet).
    assert lines(SOURCE, "FL102") == [20]


def test_the_returns_entry_was_a_tensor_and_breaks():
    torch = pytest.importorskip("torch")
    x = torch.randn(4)
    assert breaks_under_dynamo(_run(SOURCE, "Crop")(), x, torch.tensor([3, 1]))
    assert not breaks_under_dynamo(_run(SOURCE, "Step")(), x, 3)


@pytest.mark.parametrize(
    ("doc", "host"),
    [
        ("Arguments\n---------\nn : int\n    Count.", True),
        ("Parameters\n----------\nx : torch.Tensor\nn : int", True),
        ("Args:\n    n (int): count.", True),
        ("n : int\n    Count.", True),  # no header at all
        ("Returns\n-------\nn : int\n    Count.", False),
        ("Attributes\n----------\nn : int", False),
        ("Arguments\n---------\nx : torch.Tensor\n\nReturns\n-------\nn : int", False),
        ("Returns:\n    n (int): count.", False),
        ("Yields:\n    n (int): count.", False),
        ("Returns\n-------\nx : torch.Tensor\n:type n: int", True),  # Sphinx lines anywhere
        ("Returns\n-------\nx : torch.Tensor\n\nArgs:\n    n (int): count.", True),
    ],
)
def test_sections(doc, host):
    doc_lines = "\n    ".join(doc.splitlines())
    node = ast.parse(f'def f(x, n):\n    """Doc.\n\n    {doc_lines}\n    """\n').body[0]
    assert (documented_host_params(node, ["n"]) == {"n"}) is host
