"""max_pool2d values as a generated window kernel, its pointwise prologue computed per tap."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import needs_interpreter, tol

from fuselint.backend import fuselint_backend, history_mark, reports_since

pytestmark = needs_interpreter


def _run(fn, *args):
    torch._dynamo.reset()
    start = history_mark()
    with torch.no_grad():
        got = torch.compile(fn, backend=fuselint_backend, dynamic=False)(*args)
    return got, [k for r in reports_since(start) for k in r.kernels if k.calls]


@pytest.mark.parametrize(
    "kernel, stride, padding, dilation, ceil_mode",
    [
        (2, 2, 0, 1, False),
        (3, 2, 1, 1, False),
        (3, 1, 1, 1, False),
        ((3, 2), (2, 1), (1, 0), (2, 1), True),
        (2, 3, 0, 1, True),
    ],
)
def test_window_geometry_matches_aten(kernel, stride, padding, dilation, ceil_mode):
    def fn(x):
        return F.max_pool2d(torch.relu(x * 2 - 1), kernel, stride, padding, dilation, ceil_mode)

    x = torch.randn(2, 3, 11, 10)
    got, kernels = _run(fn, x)
    torch.testing.assert_close(got, fn(x))
    assert len(kernels) == 1 and any(v.kind == "window" for v in kernels[0].ir.values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_channels_last_and_three_dim_inputs(dtype):
    fn = lambda x: F.max_pool2d(torch.sigmoid(x), 2)  # noqa: E731
    x = torch.randn(2, 4, 8, 6, dtype=dtype).contiguous(memory_format=torch.channels_last)
    got, kernels = _run(fn, x)
    torch.testing.assert_close(got, fn(x), **tol(dtype))
    assert len(kernels) == 1
    y = torch.randn(3, 9, 7, dtype=dtype)
    got, kernels = _run(fn, y)
    torch.testing.assert_close(got, fn(y), **tol(dtype))
    assert len(kernels) == 1


def test_nan_in_a_window_propagates_and_padding_never_wins():
    fn = lambda x: F.max_pool2d(x - 100.0, 3, 2, 1)  # noqa: E731  (all values < 0: padding must not give 0)
    x = torch.randn(1, 2, 8, 8)
    x[0, 1, 3, 4] = float("nan")
    got, _ = _run(fn, x)
    torch.testing.assert_close(got, fn(x), equal_nan=True)
    assert got.isnan().any()


def test_epilogue_after_the_window_is_fused_too():
    fn = lambda x, b: F.max_pool2d(torch.relu(x), 2) * 3 + b  # noqa: E731
    x, b = torch.randn(2, 4, 8, 8), torch.randn(4, 1, 1)
    got, kernels = _run(fn, x, b)
    torch.testing.assert_close(got, fn(x, b))
    assert len(kernels) == 1


def test_prologue_value_used_elsewhere_is_not_pooled_per_tap():
    def fn(x):
        r = torch.relu(x)
        return F.max_pool2d(r, 2), r.sum()

    x = torch.randn(2, 4, 8, 8)
    got, _ = _run(fn, x)
    for g, w in zip(got, fn(x), strict=True):
        torch.testing.assert_close(g, w)


def test_indices_in_use_run_the_hand_pooling_kernel():
    # the window op computes values only; a pool whose indices are read runs as
    # fuselint::max_pool2d_with_indices (backend/max_pool.py), ATen's values and indices
    fn = lambda x: F.max_pool2d(torch.relu(x), 2, return_indices=True)  # noqa: E731
    x = torch.randn(1, 2, 4, 4)
    torch._dynamo.reset()
    start = history_mark()
    with torch.no_grad():
        values, indices = torch.compile(fn, backend=fuselint_backend, dynamic=False)(x)
    want_v, want_i = fn(x)
    torch.testing.assert_close(values, want_v)
    assert torch.equal(indices, want_i)
    code = reports_since(start)[-1].graph_module.code
    assert "fuselint.max_pool2d_with_indices" in code and "aten.max_pool2d_with_indices" not in code, code
