"""Max-pool's input gradient as one gather kernel (fuselint.backend.max_pool.py), interpreter on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import Unlaunchable, needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.max_pool import max_pool2d_grad, max_pool2d_with_indices
from fuselint.backend.runtime import HandKernel

pytestmark = needs_interpreter

aten = torch.ops.aten


@pytest.mark.parametrize(
    "kernel, stride, padding, ceil",
    [(3, 2, 1, False), (2, 2, 0, False), (3, 1, 1, False), (3, 2, 0, True), (5, 3, 2, False)],
    ids=["resnet", "k2s2", "overlap3", "ceil", "k5s3"],
)
@pytest.mark.parametrize("layout", [torch.channels_last, torch.contiguous_format], ids=["nhwc", "nchw"])
def test_the_gather_matches_atens_gradient(kernel, stride, padding, ceil, layout):
    g = torch.Generator().manual_seed(kernel * 10 + stride)
    x = torch.randn(2, 5, 11, 9, generator=g).to(memory_format=layout)
    x[0, 0] = 1.0  # ties: every window of this plane picks its first element, as ATen records
    out, idx = aten.max_pool2d_with_indices(x, [kernel] * 2, [stride] * 2, [padding] * 2, [1, 1], ceil)
    grad = torch.randn(out.shape, generator=g).to(memory_format=layout)
    want = aten.max_pool2d_with_indices_backward(
        grad, x, [kernel] * 2, [stride] * 2, [padding] * 2, [1, 1], ceil, idx
    )
    got = max_pool2d_grad(grad, x, idx, [kernel] * 2, [stride] * 2, [padding] * 2)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


POOLS = [
    (3, 2, 1, False),
    (2, 2, 0, False),
    (3, 1, 1, False),
    (3, 2, 0, True),
    (5, 3, 2, False),
    (2, 3, 1, True),
]


@pytest.mark.parametrize(
    "kernel, stride, padding, ceil", POOLS, ids=["resnet", "k2s2", "overlap3", "ceil", "k5s3", "ceil-gap"]
)
@pytest.mark.parametrize("layout", [torch.channels_last, torch.contiguous_format], ids=["nhwc", "nchw"])
def test_the_pool_keeps_atens_maxima_and_indices(kernel, stride, padding, ceil, layout):
    g = torch.Generator().manual_seed(kernel * 10 + stride)
    x = torch.randn(2, 5, 11, 9, generator=g).to(memory_format=layout)
    x[0, 0] = 1.0  # ties: the first of equal maxima
    x[0, 1, ::2] = float("-inf")  # windows of -inf only keep their first tap
    x[0, 1, 1::2] = float("-inf")
    x[1, 2, 3, 4] = x[1, 2, 4, 5] = float("nan")  # NaN wins, and the last NaN of a window
    x[1, 3] = torch.randn(11, 9, generator=g).round()  # many ties among small integers
    args = ([kernel] * 2, [stride] * 2, [padding] * 2)
    want = aten.max_pool2d_with_indices(x, *args, [1, 1], ceil)
    got = max_pool2d_with_indices(x, *args, ceil)
    for w, o in zip(want, got, strict=True):
        assert o.shape == w.shape and o.stride() == w.stride() and o.dtype == w.dtype
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0, equal_nan=True)
    assert torch.equal(got[1], want[1])


@pytest.mark.parametrize("wide", [False, True], ids=["int32", "int64"])
@pytest.mark.parametrize("channels", [70, 3])
def test_channel_tiles_and_int64_offsets_match_aten(monkeypatch, channels, wide):
    # 70 channels span two channel tiles of 64, the second mostly masked; 3 is below one tile
    import fuselint.backend.max_pool as pg

    if wide:  # every offset computed in int64, as for tensors past 2**31 elements
        monkeypatch.setattr(pg, "INT32_OFFSETS", 0)
    g = torch.Generator().manual_seed(channels)
    x = torch.randn(2, channels, 7, 6, generator=g).to(memory_format=torch.channels_last)
    out, idx = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
    grad = torch.randn(out.shape, generator=g).to(memory_format=torch.channels_last)
    want = aten.max_pool2d_with_indices_backward(grad, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx)
    got = max_pool2d_grad(grad, x, idx, [3, 3], [2, 2], [1, 1])
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    pooled = max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], False)
    assert torch.equal(pooled[0], out) and torch.equal(pooled[1], idx)


def stem(x):
    return F.max_pool2d(torch.relu(x), 3, 2, 1).square().sum()


def test_a_training_step_runs_the_gather_and_matches_eager():
    x = torch.randn(2, 4, 10, 10).to(memory_format=torch.channels_last).requires_grad_()
    torch._dynamo.reset()
    start = history_mark()
    torch.compile(stem, backend=fuselint_backend)(x).backward()
    got = x.grad
    x.grad = None
    stem(x).backward()
    code = "".join(r.graph_module.code for r in reports_since(start) if "backward" in r.graph)
    assert "fuselint.max_pool2d_grad" in code and "max_pool2d_with_indices_backward" not in code, code
    forward = "".join(r.graph_module.code for r in reports_since(start) if "backward" not in r.graph)
    assert "fuselint.max_pool2d_with_indices" in forward and "aten.max_pool2d_with_indices" not in forward, (
        forward
    )
    torch.testing.assert_close(got, x.grad, atol=1e-5, rtol=1e-5)


def test_a_kernel_that_cannot_launch_leaves_the_gradient_to_aten(monkeypatch, caplog):
    import fuselint.backend.max_pool as pg

    monkeypatch.setattr(pg, "GATHER_GRADS", HandKernel(Unlaunchable(), "max-pool gradients"))
    x = torch.randn(1, 2, 6, 6)
    out, idx = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
    grad = torch.randn(out.shape)
    with caplog.at_level("WARNING", logger="fuselint.backend"):
        got = max_pool2d_grad(grad, x, idx, [3, 3], [2, 2], [1, 1])
    want = aten.max_pool2d_with_indices_backward(grad, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx)
    assert torch.equal(got, want) and "run through ATen: RuntimeError: no kernel here" in caplog.text


def test_a_ceil_mode_gradient_left_to_aten_keeps_its_ceil_mode(monkeypatch):
    # the last window of 10 at k3 s2 starts inside the input only in ceil mode: ATen's gradient
    # must be told, or it computes 4 windows, not grad's 5, and raises
    import fuselint.backend.max_pool as pg

    monkeypatch.setattr(pg, "GATHER_GRADS", HandKernel(Unlaunchable(), "max-pool gradients"))
    x = torch.randn(2, 3, 10, 10, generator=torch.Generator().manual_seed(3))
    out, idx = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [0, 0], [1, 1], True)
    assert out.shape[-2:] == (5, 5)
    grad = torch.randn(out.shape)
    want = aten.max_pool2d_with_indices_backward(grad, x, [3, 3], [2, 2], [0, 0], [1, 1], True, idx)
    assert torch.equal(max_pool2d_grad(grad, x, idx, [3, 3], [2, 2], [0, 0]), want)
    # grad and indices of other strides go to ATen too, without a failed launch
    monkeypatch.undo()
    got = max_pool2d_grad(grad.transpose(2, 3).contiguous().transpose(2, 3), x, idx, [3, 3], [2, 2], [0, 0])
    assert torch.equal(got, want)


def test_float64_pools_stay_float64():
    # the kernels compare and accumulate in float32: a float64 pool must not go through them
    x = torch.ones(1, 1, 4, 4, dtype=torch.float64)
    x[0, 0, 0, 1] = 1 + 1e-12  # the maximum of the first window, only in float64
    x[0, 0, 3, 3] = 0.1  # not a float32 value
    out, idx = max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], False)
    want = aten.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    assert torch.equal(out, want[0]) and torch.equal(idx, want[1])
    grad = torch.full(out.shape, 0.1, dtype=torch.float64)
    got = max_pool2d_grad(grad, x, idx, [2, 2], [2, 2], [0, 0])
    assert torch.equal(
        got, aten.max_pool2d_with_indices_backward(grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx)
    )


def test_a_float64_training_pool_is_left_to_aten():
    def pool(x):
        return F.max_pool2d(x, 3, 2, 1).exp().sum()

    x = torch.randn(2, 3, 9, 9, dtype=torch.float64, requires_grad=True)
    torch._dynamo.reset()
    start = history_mark()
    got = torch.compile(pool, backend=fuselint_backend)(x)
    got.backward()
    code = "".join(r.graph_module.code for r in reports_since(start))
    assert "fuselint.max_pool2d" not in code, code
    grad, x.grad = x.grad, None
    want = pool(x)
    want.backward()
    assert torch.equal(got, want) and torch.equal(grad, x.grad)


def test_offsets_go_int64_before_a_programs_indices_pass_int32():
    # _tile's first index of the last program plus BLOCK may pass 2**31 although every element's
    # offset stays below it: int32 would wrap to negative indices that the `< count` mask keeps
    # (NCHW; channels_last tiles count pixels, C >= 2 of them per element offset)
    import fuselint.backend.max_pool as pg

    seen = {}

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.update(kwargs)

    space = torch.empty(1, 1, 1, 2**31 - 8, device="meta")  # the last program passes 2**31
    assert pg._launch(HandKernel(Recorder(), "test"), space, space, sizes=(), strides=())
    assert seen["WIDE"] is True
    small = torch.empty(1, 1, 1, 2**31 - 2**20, device="meta")
    assert pg._launch(HandKernel(Recorder(), "test"), small, small, sizes=(), strides=())
    assert seen["WIDE"] is False
