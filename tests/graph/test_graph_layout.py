"""Convolutions are rewritten the way Inductor lowers them for a GPU, and compute the same values."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from fuselint.graph.layout import channels_last_pays, gpu_conv_layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fusion"))
from fusion_capture import aten_forwards  # one AOT recorder for the tests of both rooms

aten = torch.ops.aten


def aten_forward(model, x):
    """(ATen forward graph, the real arguments it was called with) of model.eval()(x)."""
    ((gm, args),) = aten_forwards(model.eval(), x)
    return gm, args


class Flatten(nn.Module):
    """conv -> BN -> ReLU -> conv -> flatten -> linear: the flatten's view fails on channels_last."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(64, 96, 3, padding=1), nn.BatchNorm2d(96), nn.ReLU(), nn.Conv2d(96, 96, 3, padding=1)
        )
        self.head = nn.Linear(96 * 4 * 4, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.body(x), 1))


MODELS = {
    "small": (
        lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        (2, 3, 16, 16),
    ),
    "default": (lambda: nn.Sequential(nn.Conv2d(96, 96, 3), nn.ReLU()), (1, 96, 8, 8)),
    "grouped": (lambda: nn.Conv2d(96, 96, 3, groups=2), (1, 96, 8, 8)),
    "in_out": (lambda: nn.Conv2d(192, 64, 3), (1, 192, 8, 8)),
    "depthwise": (lambda: nn.Conv2d(96, 96, 3, groups=96, padding=1), (1, 96, 8, 8)),
    "transposed": (lambda: nn.ConvTranspose2d(96, 96, 2, stride=2), (1, 96, 4, 4)),
    "conv1d": (lambda: nn.Conv1d(8, 16, 3), (2, 8, 20)),
    "flatten": (Flatten, (2, 64, 4, 4)),
}


@pytest.mark.parametrize("inference", [True, False], ids=["inference", "training"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_channels_last_decision_is_inductors(name, inference):
    from torch._inductor.graph import GraphLowering

    build, shape = MODELS[name]
    gm, _ = aten_forward(build(), torch.randn(shape))
    # mkldnn off: Inductor's CPU shortcut (always channels_last) gives way to its GPU rule
    with torch.backends.mkldnn.flags(enabled=False):
        expected = GraphLowering.decide_layout_opt(gm, is_inference=inference)
    assert channels_last_pays(gm, inference=inference) == expected


@pytest.mark.parametrize("name", sorted(MODELS))
def test_rewritten_graph_computes_the_same_values_with_the_same_output_strides(name):
    build, shape = MODELS[name]
    gm, args = aten_forward(build(), torch.randn(shape))
    new = gpu_conv_layout(gm, inference=True)
    assert new is not gm  # every model here has a bias to peel, at least
    want, got = gm(*args), new(*args)
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
        assert g.stride() == w.stride()
    for node in new.graph.nodes:
        if node.target is aten.convolution.default:
            assert node.args[2] is None, "the bias is peeled off into a pointwise add"


def test_layout_copies_only_what_is_not_channels_last_already():
    model = nn.Sequential(nn.Conv2d(96, 96, 3, padding=1), nn.ReLU(), nn.Conv2d(96, 96, 3, padding=1))
    gm, args = aten_forward(model, torch.randn(1, 96, 8, 8))
    new = gpu_conv_layout(gm, inference=True)
    copied = [
        n.args[0].name
        for n in new.graph.nodes
        if n.target is aten.clone.default and n.kwargs.get("memory_format") is torch.channels_last
    ]
    # the input and both weights; the second conv reads ReLU's output, channels_last already
    assert len(copied) == 3 and all(n.startswith("arg") for n in copied)
    convs = [n for n in new.graph.nodes if n.target is aten.convolution.default]
    assert all(n.meta["val"].is_contiguous(memory_format=torch.channels_last) for n in convs)


def test_a_view_that_channels_last_forbids_reads_a_contiguous_copy():
    gm, _ = aten_forward(Flatten(), torch.randn(2, 64, 4, 4))
    new = gpu_conv_layout(gm, inference=True)
    views = [n for n in new.graph.nodes if n.target is aten.view.default and len(n.args[1]) == 2]
    (flat,) = [v for v in views if v.args[1][1] == 96 * 16]
    assert flat.args[0].target is aten.clone.default
    assert flat.args[0].kwargs["memory_format"] is torch.contiguous_format


def test_new_nodes_carry_the_source_line_of_their_convolution():
    gm, _ = aten_forward(MODELS["small"][0](), torch.randn(2, 3, 16, 16))
    new = gpu_conv_layout(gm, inference=True)
    (conv,) = [n for n in new.graph.nodes if n.target is aten.convolution.default]
    added = [n for n in new.graph.nodes if n.name not in {m.name for m in gm.graph.nodes}]
    assert {n.target for n in added} >= {aten.add.Tensor, aten.view.default, aten.clone.default}
    for n in added:
        if n.op == "call_function" and n.target is not aten.clone.default:
            assert n.meta.get("stack_trace") == conv.meta.get("stack_trace")


def test_outputs_whose_strides_differ_only_along_size_one_dims_are_not_copied():
    # The conv's (N, C, 1, 1) output is channels_last after the rewrite: the same layout.
    model = nn.Sequential(nn.Conv2d(96, 96, 8), nn.ReLU())
    gm, args = aten_forward(model, torch.randn(2, 96, 8, 8))
    new = gpu_conv_layout(gm, inference=True)
    (out,) = next(n for n in new.graph.nodes if n.op == "output").args[0]
    assert out.target is not aten.clone.default
    torch.testing.assert_close(new(*args)[0], gm(*args)[0], atol=1e-5, rtol=1e-5)


def test_graph_without_convolutions_is_left_alone():
    gm, _ = aten_forward(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), torch.randn(4, 8))
    assert gpu_conv_layout(gm, inference=True) is gm


def _stem_backward(grad, image, weight):
    """A stem convolution's backward as a training graph has it: no input gradient."""
    out = aten.convolution_backward.default(
        grad, image, weight, [0], [2, 2], [3, 3], [1, 1], False, [0, 0], 1, [False, True, False]
    )
    return (out[1],)


def test_a_channels_last_gradient_reads_the_nchw_image_through_a_channels_last_copy():
    """ResNet's stem in a training step: the gradient comes channels_last from the kernel after
    the channels_last forward, the image is the NCHW graph input. Without a copy, ATen copies
    the gradient to NCHW and cuDNN converts both to NHWC (320 µs a step on an H100)."""
    grad = torch.randn(2, 8, 8, 8).to(memory_format=torch.channels_last)
    image, weight = torch.randn(2, 3, 16, 16), torch.randn(8, 3, 7, 7)
    gm = make_fx(_stem_backward, tracing_mode="fake")(grad, image, weight)
    new = gpu_conv_layout(gm, inference=False)
    (conv,) = [n for n in new.graph.nodes if n.target is aten.convolution_backward.default]
    copy = conv.args[1]
    assert copy.target is aten.clone.default and copy.kwargs["memory_format"] is torch.channels_last
    assert conv.args[2].op == "placeholder"  # the weight goes as every other conv's
    (got,) = new(grad, image, weight)
    torch.testing.assert_close(got, _stem_backward(grad, image, weight)[0])
    assert got.stride() == weight.stride()  # the weight's gradient keeps the weight's layout
    # an NCHW gradient changes nothing
    plain = make_fx(_stem_backward, tracing_mode="fake")(grad.contiguous(), image, weight)
    assert gpu_conv_layout(plain, inference=False) is plain


def test_the_backend_skips_eager_layouts_and_gets_the_same_graph(monkeypatch):
    import fuselint.graph.layout as layout

    gm, args = aten_forward(MODELS["small"][0](), torch.randn(2, 3, 16, 16))
    priced = gpu_conv_layout(gm, inference=True)
    monkeypatch.setattr(layout, "eager_layouts", lambda *a, **k: pytest.fail("eager layouts computed"))
    backend = gpu_conv_layout(gm, inference=True, eager=False)
    assert backend.code == priced.code
    assert not any(layout.EAGER_LAYOUT in n.meta for n in backend.graph.nodes)


def _block_backward(grad, x, weight):
    """A 3x3 convolution's backward inside a channels_last network: both gradients."""
    out = aten.convolution_backward.default(
        grad, x, weight, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]
    )
    return out[0], out[1]


def test_a_channels_last_backward_reads_its_nchw_weight_through_a_channels_last_copy():
    """ATen converts an NCHW weight beside channels_last activations inside the op, as a strided
    copy (10 µs for a 512x512x3x3 weight on an H100, 16 per ResNet-50 step); the copy is the
    backend's own kernel instead. The weight's gradient is channels_last either way."""
    grad = torch.randn(2, 8, 6, 6).to(memory_format=torch.channels_last)
    x = torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last)
    weight = torch.randn(8, 4, 3, 3)
    gm = make_fx(_block_backward, tracing_mode="fake")(grad, x, weight)
    new = gpu_conv_layout(gm, inference=False)
    (conv,) = [n for n in new.graph.nodes if n.target is aten.convolution_backward.default]
    assert conv.args[1].op == "placeholder"  # already channels_last
    copy = conv.args[2]
    assert copy.target is aten.clone.default and copy.kwargs["memory_format"] is torch.channels_last
    got, want = new(grad, x, weight), _block_backward(grad, x, weight)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()
    # a 1x1 weight is channels_last already (its strides say both)
    one = make_fx(_block_backward, tracing_mode="fake")(grad, x, torch.randn(8, 4, 1, 1))
    assert gpu_conv_layout(one, inference=False) is one
