"""A convolution over non-overlapping patches of a few-channel image runs as a copy into patch
order and one addmm (fuselint/backend/patchify.py); on CPU through Triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from backend_helpers import needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since

pytestmark = needs_interpreter

aten = torch.ops.aten


class PatchEmbed(nn.Module):
    """ViT's stem: 4 x 4 patches of a 3-channel image, a class token, positions, LayerNorm."""

    def __init__(self, channels=3, patch=4, width=32, bias=True):
        super().__init__()
        self.proj = nn.Conv2d(channels, width, patch, stride=patch, bias=bias)
        self.cls = nn.Parameter(torch.randn(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, 17, width))
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.norm(x)


def _compile(model, x, train=False):
    torch._dynamo.reset()
    mark = history_mark()
    if train:
        got = torch.compile(model, backend=fuselint_backend)(x)
    else:
        with torch.no_grad():
            got = torch.compile(model, backend=fuselint_backend)(x)
    (report,) = reports_since(mark)
    return got, report


def _targets(report):
    return [n.target for n in report.graph_module.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("bias", [True, False])
def test_a_patch_embedding_runs_as_one_matmul(bias):
    torch.manual_seed(0)
    model, x = PatchEmbed(bias=bias).eval(), torch.randn(2, 3, 16, 16)
    got, report = _compile(model, x)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)
    targets = _targets(report)
    assert aten.convolution.default not in targets
    assert targets.count(aten.addmm.default if bias else aten.mm.default) == 1
    # the copy into patch order, and the stem (cat, positions, LayerNorm) reading the GEMM's
    # channels_last result through the flatten and transpose: no copy back to NCHW
    assert [k.__name__.removeprefix("fuselint_") for k in report.kernels] == [
        "clone",
        "cat_add_var_mean_rsqrt_sub",
    ]
    assert aten.clone.default not in targets


def test_convolutions_that_are_not_patches_or_have_aligned_channels_stay():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16)
    cases = [
        (nn.Conv2d(3, 8, 3, stride=1, padding=1), x),  # overlapping windows
        (nn.Conv2d(3, 8, 4, stride=2), x),  # stride below the kernel
        (nn.Conv2d(3, 6, 4, stride=4, groups=3), x),  # grouped
        (nn.Conv2d(8, 8, 4, stride=4), torch.randn(2, 8, 16, 16)),  # cuDNN's aligned channels
        (nn.Conv2d(3, 8, 5, stride=5), torch.randn(2, 3, 16, 16)),  # 16 is not a multiple of 5
    ]
    for conv, inp in cases:
        got, report = _compile(conv.eval(), inp)
        with torch.no_grad():
            torch.testing.assert_close(got, conv(inp), atol=1e-4, rtol=1e-4)
        assert aten.convolution.default in _targets(report), conv


def test_a_training_graph_keeps_its_convolution():
    torch.manual_seed(0)
    model, x = PatchEmbed().train(), torch.randn(2, 3, 16, 16)
    got, report = _compile(model, x, train=True)
    torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)
    assert aten.convolution.default in _targets(report)


class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 4, stride=4)

    def forward(self, x):
        return torch.relu(self.conv(x))


@pytest.mark.parametrize(
    "model, x",
    [
        # an image in channels_last views into patches as well
        (
            nn.Conv2d(3, 16, 4, stride=4),
            torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last),
        ),
        # relu of the channels_last GEMM result would be channels_last, eager's is NCHW: a copy
        (ConvRelu(), torch.randn(2, 3, 16, 16)),
    ],
)
def test_the_result_keeps_the_convolutions_layout(model, x):
    torch.manual_seed(0)
    got, report = _compile(model.eval(), x)
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert got.stride() == want.stride()
    assert aten.convolution.default not in _targets(report)
