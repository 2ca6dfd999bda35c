"""The missed class judge10 found on speechbrain 1.1.2 (bench/results/precision_untuned10.md,
processing/signal_processing.py:437, `assert 0 < notch_freq <= 1` on a drawn frequency): an assert
with no message (or a literal one) was never flagged, because dynamo turns `assert t` into
`torch._assert_async`. That holds only for the value the assert finally tests. Python reads the
truth of each operand of `and` / `or` but the last and of the operand of `not` itself, and a
chained comparison is a chain of jumps that dynamo no longer sees as an assert: dynamo (torch 2.13)
breaks on each that holds a tensor (gb0170). Each flagged assert below breaks alone under dynamo; each quiet one traces."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import breaks_under_dynamo, lines

# One assert per line, each with the parameters it needs: `x` a tensor, `n` an int.
ASSERTS = {
    "assert x.sum() < 100": False,
    "assert 0 < x.sum() <= 100": True,
    "assert x.sum() > 0 and x.sum() < 100": True,
    "assert x.sum() > 0 or x.sum() < 100": True,
    "assert not (x.sum() > 100)": True,
    "assert (x < 100).all()": False,
    "assert 0 < n <= 4": False,
    "assert n > 0 and x.sum() < 100": False,
    "assert 0 < n <= x.sum()": True,
    "assert x is not None and x.sum() > 0": False,
    'assert 0 < x.sum() <= 100, "out of range"': True,
    # review12: a conditional expression's body jumps to its end, not to the raise, unless the
    # other arm is a false constant; its other arm is the value the assert finally tests
    "assert x.sum() < 100 if n > 0 else True": True,
    "assert x.sum() < 100 if n > 0 else x.sum() > -100": True,
    "assert x.sum() < 100 if n > 0 else False": False,
    "assert True if n < 0 else x.sum() < 100": False,
}


def _module(body: str) -> str:
    return f"""
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x, n: int):
        {body}
        return x + 1
"""


@pytest.mark.parametrize(("statement", "breaks"), ASSERTS.items())
def test_assert_flagged_where_python_reads_a_truth(statement, breaks):
    assert lines(_module(statement), "FL102") == ([8] if breaks else [])


@pytest.mark.parametrize(("statement", "breaks"), ASSERTS.items())
def test_assert_breaks_under_dynamo_as_flagged(statement, breaks):
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(textwrap.dedent(_module(statement)), "snippet.py", "exec"), namespace)  # noqa: S102
    assert breaks_under_dynamo(namespace["M"](), torch.rand(3), 2) is breaks


def test_element_of_an_iterated_tensor_handed_to_a_helper():
    # speechbrain's DropFreq hands each drawn frequency to `notch_filter`, which asserts its range.
    source = """
        import torch
        from torch import nn


        def notch(freq, width=101):
            assert 0 < freq <= 1
            return torch.arange(width) * freq


        class Drop(nn.Module):
            def forward(self, x):
                out = x
                for f in torch.rand(2):
                    out = out + notch(f).sum()
                return out
    """
    assert lines(source, "FL102") == [7]
