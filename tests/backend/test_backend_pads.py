"""Pads moved before the elementwise chain they pad (fuselint/backend/pads.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from backend_helpers import aten_graph, needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.pads import sink_pads

aten = torch.ops.aten


def bn_relu6_pad(x, mean, invstd, w, b):
    """BatchNorm (inference) + ReLU6 + TF "same" padding, as HF MobileNetV2 runs them."""
    c = (1, -1, 1, 1)
    y = ((x - mean.view(c)) * invstd.view(c) * w.view(c) + b.view(c)).clamp(0, 6)
    return (F.pad(y, (0, 1, 0, 1)) * 1.0,)


def _args(channels=4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, channels, 7, 7, generator=g) * 3
    return (x, *(torch.randn(channels, generator=g) for _ in range(4)))


def _pads(gm):
    return [n for n in gm.graph.nodes if n.target is aten.constant_pad_nd.default]


def test_the_pad_moves_to_the_chains_input_and_the_result_is_bit_equal():
    args = _args()
    gm = aten_graph(bn_relu6_pad, *args)
    want = gm(*args)[0]
    assert sink_pads(gm) == 1
    (pad,) = [p for p in _pads(gm) if p.args[0].op == "placeholder"]  # pads x itself now
    assert pad.args[0].name == "x_1" or pad.args[0] is next(iter(gm.graph.nodes))
    assert not [
        p for p in _pads(gm) if p.args[0].op == "call_function" and p.args[0].target is not aten.full.default
    ]
    got = gm(*args)[0]
    assert torch.equal(got, want)  # bit for bit: the same ops on the same values inside
    assert torch.all(got[..., -1, :] == 0) and torch.all(got[..., :, -1] == 0)


def test_a_nonzero_fill_is_kept_on_the_border():
    def f(x):
        return (F.pad(torch.sigmoid(x) * 2, (1, 1, 2, 0), value=-5.0),)

    x = torch.randn(2, 3, 4, 5)
    gm = aten_graph(f, x)
    want = gm(x)[0]
    assert sink_pads(gm) == 1
    got = gm(x)[0]
    assert torch.all(got[..., :2, :] == -5.0) and torch.all(got[..., [0, -1]] == -5.0)
    # the same ops on the same values; ATen's CPU sigmoid may round an element differently by
    # its place in a vector register
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_a_chain_read_elsewhere_or_varying_along_the_padded_dims_stays():
    def shared(x):
        y = torch.relu(x)
        return F.pad(y, (1, 1)), y + 1  # y is read by the add too

    def row_scale(x, r):
        return (F.pad(x * r, (1, 1)),)  # r varies along W: padding it shifts it

    x = torch.randn(2, 3, 4, 5)
    assert sink_pads(aten_graph(shared, x)) == 0
    assert sink_pads(aten_graph(row_scale, x, torch.randn(5))) == 0
    assert sink_pads(aten_graph(lambda x: (F.pad(x, (1, 1)),), x)) == 0  # nothing to move


@needs_interpreter
def test_a_padded_bn_relu6_compiles_to_one_kernel_without_a_pad_kernel():
    args = _args()
    torch._dynamo.reset()
    start = history_mark()
    got = torch.compile(bn_relu6_pad, backend=fuselint_backend)(*args)[0]
    (report,) = reports_since(start)
    names = [k.__name__ for k in report.kernels]
    assert len(names) == 1 and not report.fallbacks, (names, report.fallbacks)
    torch.testing.assert_close(got, bn_relu6_pad(*args)[0], atol=1e-6, rtol=1e-6)


def test_an_integer_division_keeps_its_pad_after_it():
    """Moved before a division, the chain would also divide at the border, by the zero its
    operand was padded with: integer division by zero fails (CPU) where the original graph ran."""
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(1, 9, (2, 3, 4, 4), generator=g) for _ in range(2))
    for divide in (torch.floor_divide, torch.remainder, torch.fmod):

        def f(x, y):
            return F.pad(divide(x, y) + 1, [1, 1, 1, 1])  # noqa: B023 (traced at once)

        gm = aten_graph(f, x, y)
        assert sink_pads(gm) == 1  # after the division only: `+ 1` moves
        assert torch.equal(gm(x, y), f(x, y))
    gm = aten_graph(lambda x, y: F.pad((x / y).floor(), [1, 1]), x, y)  # true division: a float
    assert sink_pads(gm) == 1
