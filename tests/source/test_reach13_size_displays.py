"""FL101 on a tensor inside a size display (speechbrain 1.1.2's augment/freq_domain.py:154,
`torch.randint(low, high, size=(batch_size, n_masks))` with `n_masks` drawn by `torch.randint`):
dynamo (torch 2.13) reads it on the host (gb0033, "Data dependent operator") as it does a size
handed alone. Not flagged: a torch op on Python numbers (longformer's
`torch.div(seq_len, w, rounding_mode="trunc") - 1` with `seq_len` a shape), whose value dynamo
knows while tracing, and a randint's bounds (no sizes)."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, lines, load_snippet

SOURCE = """
    import torch
    from torch import nn


    class Sizes(nn.Module):
        def forward(self, x, w: int):
            n = torch.randint(1, 3, (1,))
            a = torch.zeros((2, n))
            b = torch.rand(size=(2, n))
            c = torch.randint(0, 5, (2, n))
            d = x.new_zeros([2, n])
            e = x[:4].view((n, -1))
            return a.sum() + b.sum() + c.sum() + d.sum() + e.sum()


    class Chunks(nn.Module):
        def forward(self, x, w: int):
            chunks = torch.div(x.shape[1], w, rounding_mode="trunc") - 1
            a = x.view(x.shape[0], chunks + 1, -1)
            b = torch.zeros((2, chunks))
            c = torch.randint(0, 5, (x.shape[0], 2))
            return a.sum() + b.sum() + c.sum()
"""


def test_tensors_in_size_displays_are_flagged():
    assert lines(SOURCE, "FL101") == [9, 10, 11, 12, 13]


def test_a_randint_bound_is_no_size():
    source = """
        import torch

        @torch.compile
        def draw(x):
            n = x.sum().long()
            return torch.randint(0, n + 1, size=(2,)), torch.randint(n, (2,)), torch.randint(2, (n,))
    """
    assert lines(source, "FL101") == [7]  # `(n,)`, the last call's size


@pytest.mark.parametrize(
    "size_of",
    [
        lambda n, x: torch_mod().zeros((2, n)),
        lambda n, x: torch_mod().rand(size=(2, n)),
        lambda n, x: torch_mod().randint(0, 5, (2, n)),
        lambda n, x: x.new_zeros([2, n]),
        lambda n, x: x[:4].view((n, -1)),
    ],
)
def test_each_display_breaks(size_of):
    torch = pytest.importorskip("torch")

    def fn(x):
        n = torch.randint(1, 3, (1,))
        return size_of(n, x).sum() + x.sum()

    assert dynamo_break_reasons(fn, torch.rand(4, 6)) != []


def test_a_torch_op_on_python_numbers_traces_as_a_size():
    torch = pytest.importorskip("torch")
    assert dynamo_break_reasons(load_snippet(SOURCE)["Chunks"](), torch.rand(2, 6), 2) == []


def torch_mod():
    return pytest.importorskip("torch")


ANNOTATED = """
    import torch
    from torch import nn


    def grid(x, height: torch.Tensor, width: torch.Tensor):
        return x.view((height, width, -1))


    def rows(x, height: torch.Tensor):
        return x.view((height, -1))


    class M(nn.Module):
        def forward(self, x):
            h, w = x.shape[-2:]
            return grid(x, h, w).sum() + grid(x, 2, 3).sum() + rows(x, x[0, 0, 0].long() + 2).sum()
"""


def test_a_parameter_annotated_tensor_that_every_caller_hands_an_int_is_an_int():
    # grid's sizes are shapes and literals at every call: no host read (line 7); rows is handed a
    # tensor (line 11)
    assert lines(ANNOTATED, "FL101") == [11]


def test_the_annotated_parameters_trace_when_handed_ints():
    torch = pytest.importorskip("torch")
    namespace = load_snippet(ANNOTATED)
    x = torch.zeros(2, 3, 4)
    assert dynamo_break_reasons(lambda x: namespace["grid"](x, x.shape[0], x.shape[1]), x) == []
    assert dynamo_break_reasons(lambda x: namespace["rows"](x, x[0, 0, 0].long() + 2), x) != []
