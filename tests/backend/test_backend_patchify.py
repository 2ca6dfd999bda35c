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


class _Fn(nn.Module):
    """A patch convolution, its weight a parameter, read by `fn(x, conv(x), weight)`."""

    def __init__(self, fn, channels=3, width=8, kernel=(4, 4), bias=True):
        super().__init__()
        self.conv = nn.Conv2d(channels, width, kernel, stride=kernel, bias=bias)
        self.fn = fn

    def forward(self, x):
        return self.fn(x, self.conv, self.conv.weight)


def _check(model, x, dynamic=None, atol=1e-4, rtol=1e-4):
    """Compiled and eager agree in values, shapes, strides and dtypes; the reports."""
    torch._dynamo.reset()
    mark = history_mark()
    with torch.no_grad():
        got = torch.compile(model, backend=fuselint_backend, dynamic=dynamic)(x)
        want = model(x)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol)
        assert (g.shape, g.stride(), g.dtype) == (w.shape, w.stride(), w.dtype)
    return reports_since(mark)


# Inputs at the rewrite's edges, each (model, image); all rewritten but the permuted weight, which
# cannot be viewed as (out_channels, in_channels * kh * kw).
CASES = {
    "non_square": (
        _Fn(lambda x, c, w: c(x), kernel=(2, 4)),
        torch.randn(2, 3, 8, 16),
    ),
    "whole_image_batch1": (_Fn(lambda x, c, w: c(x), kernel=(8, 8)), torch.randn(1, 3, 8, 8)),
    "whole_image_flatten": (
        _Fn(lambda x, c, w: c(x).flatten(1), kernel=(8, 8)),
        torch.randn(1, 3, 8, 8),
    ),
    "no_bias_batch1": (
        _Fn(lambda x, c, w: c(x).flatten(2).transpose(1, 2), bias=False),
        torch.randn(1, 3, 8, 8),
    ),
    "output_and_view": (
        _Fn(lambda x, c, w: (lambda y: (y, y.flatten(2).transpose(1, 2)))(c(x))),
        torch.randn(2, 3, 8, 8),
    ),
    "view_is_output_and_read": (
        _Fn(lambda x, c, w: (lambda t: (t, t.relu()))(c(x).flatten(2).transpose(1, 2))),
        torch.randn(2, 3, 8, 8),
    ),
    "views_and_nonviews": (
        _Fn(
            lambda x, c, w: (lambda y: y.flatten(2).transpose(1, 2).sum(1) + y.mean((2, 3)) + y[:, :, 0, 1])(
                c(x)
            )
        ),
        torch.randn(2, 3, 8, 8),
    ),
    "slice_select_expand": (
        _Fn(lambda x, c, w: (lambda y: y[:, 1:5, ::2].unsqueeze(0).expand(2, -1, -1, -1, -1) * 2)(c(x))),
        torch.randn(2, 3, 8, 8),
    ),
    # as_strided reads the result's memory at its own strides: the same result strides over the
    # channels_last GEMM result would be other values, so a copy back to NCHW
    "as_strided": (
        _Fn(lambda x, c, w: torch.as_strided(c(x), (2, 8, 4), (128, 16, 1)) * 2),
        torch.randn(2, 3, 16, 16),
    ),
    "input_slice": (_Fn(lambda x, c, w: c(x[:, :, 1:9, 2:10])), torch.randn(2, 3, 12, 12)),
    "input_permute": (_Fn(lambda x, c, w: c(x.permute(0, 3, 1, 2))), torch.randn(2, 8, 8, 3)),
    "input_channels_last_whole": (
        _Fn(lambda x, c, w: c(x).flatten(1), kernel=(8, 8)),
        torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last),
    ),
    "weight_computed": (
        _Fn(lambda x, c, w: torch.nn.functional.conv2d(x, w * 2, None, 4)),
        torch.randn(2, 3, 8, 8),
    ),
    "weight_permuted": (
        _Fn(lambda x, c, w: torch.nn.functional.conv2d(x, w.permute(0, 1, 3, 2), None, 4)),
        torch.randn(2, 3, 8, 8),
    ),
    "two_convs_same_input": (
        _Fn(lambda x, c, w: (c(x), torch.nn.functional.conv2d(x, w.flip(0), None, 4).relu())),
        torch.randn(2, 3, 8, 8),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_patch_convolution_at_the_edges_matches_eager(name):
    torch.manual_seed(0)
    model, x = CASES[name]
    (report,) = _check(model.eval(), x)
    assert (aten.convolution.default in _targets(report)) == (name == "weight_permuted")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_patch_embedding_matches_eager(dtype):
    torch.manual_seed(0)
    model = PatchEmbed().eval().to(dtype)
    _check(model, torch.randn(2, 3, 16, 16, dtype=dtype), atol=2e-2, rtol=2e-2)


def test_a_patch_embedding_with_dynamic_shapes_matches_eager():
    torch.manual_seed(0)
    model = PatchEmbed().eval()
    _check(model, torch.randn(2, 3, 16, 16), dynamic=True)
    _check(model, torch.randn(3, 3, 16, 16), dynamic=True)


def test_a_weight_from_the_graphs_inputs_matches_eager():
    torch.manual_seed(0)
    w, b = torch.randn(8, 3, 4, 4), torch.randn(8)
    x = torch.randn(2, 3, 8, 8)
    torch._dynamo.reset()
    with torch.no_grad():
        f = torch.compile(
            lambda x, w, b: torch.nn.functional.conv2d(x, w, b, 4).flatten(2), backend=fuselint_backend
        )
        got = f(x, w, b)
        got2 = f(x, w.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2), b)
    want = torch.nn.functional.conv2d(x, w, b, 4).flatten(2)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got2, want, atol=1e-4, rtol=1e-4)
    assert got.stride() == want.stride() and got2.stride() == want.stride()


class _Mixed(nn.Module):
    """A patch embedding under no_grad inside a model that returns it and a layer over it."""

    def __init__(self):
        super().__init__()
        self.a = PatchEmbed()
        self.b = nn.Linear(32, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.a(x)
        return y, self.b(y)


def test_a_patch_embedding_under_no_grad_in_a_model_matches_eager():
    torch.manual_seed(0)
    model = _Mixed().eval()
    x = torch.randn(2, 3, 16, 16)
    torch._dynamo.reset()
    got = torch.compile(model, backend=fuselint_backend)(x)
    want = model(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
        assert g.stride() == w.stride()
