"""Squeeze-excite convolutions of a pooled image as reductions the planner fuses."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import aten_graph, needs_interpreter, tol
from torch import nn

from fuselint.backend import fuselint_backend, history_mark, reports_since

pytestmark = needs_interpreter

BF16 = torch.bfloat16


class SqueezeExcite(nn.Module):
    """timm's SqueezeExcite: pool, reduce, SiLU, expand, sigmoid gate."""

    def __init__(self, channels: int = 32, reduced: int = 4, bias: bool = True):
        # 4 channels into `expand`: no multiple of 8, which patchify would otherwise run as a GEMM
        super().__init__()
        self.reduce = nn.Conv2d(channels, reduced, 1, bias=bias)
        self.expand = nn.Conv2d(reduced, channels, 1, bias=bias)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.expand(F.silu(self.reduce(s))))


def _run(model, x):
    torch._dynamo.reset()
    start = history_mark()
    with torch.no_grad():
        got = torch.compile(model, backend=fuselint_backend, dynamic=False)(x)
    return got, reports_since(start)


@pytest.mark.parametrize("bias", [True, False])
def test_the_reducing_convolution_runs_as_a_reduction_with_its_activation(bias):
    torch.manual_seed(0)
    model = SqueezeExcite(bias=bias).eval().to(BF16)
    x = torch.randn(4, 32, 5, 5, dtype=BF16)
    with torch.no_grad():
        eager = model(x)
    got, reports = _run(model, x)
    torch.testing.assert_close(got, eager, **tol(BF16))
    # `reduce` feeds only `expand` (through SiLU), which reads 16-bit values anyway: one
    # reduction kernel computes it and the SiLU. `expand` feeds the gate's sigmoid and the
    # multiply by the image: it stays a library call, so the gate is never rounded to 16 bits.
    assert [r.reduced for r in reports] == [1]
    kernels = [k for r in reports for k in r.kernels if k.calls]
    assert not [f for r in reports for f in r.fallbacks]
    ops = [k.ir.op_names for k in kernels]
    assert sum("convolution" in o or "addmm" in o or "mm" in o for o in ops) == 0
    assert any("sum" in o and "neg" in o for o in ops)  # the reduction and SiLU in one kernel
    graph_ops = [n.target for n in reports[0].graph_module.graph.nodes if n.op == "call_function"]
    aten = torch.ops.aten
    assert {aten.mm.default, aten.addmm.default, aten.convolution.default} & set(graph_ops)


def test_float32_gates_reduce_too_with_float32_sums():
    torch.manual_seed(0)
    model = SqueezeExcite().eval()
    x = torch.randn(2, 32, 4, 4)
    with torch.no_grad():
        eager = model(x)
    got, reports = _run(model, x)
    assert [r.reduced for r in reports] == [1]
    ops = [k.ir.op_names for r in reports for k in r.kernels if k.calls]
    assert any("sum" in o and "neg" in o for o in ops)  # the reduction and SiLU in one kernel
    torch.testing.assert_close(got, eager, atol=1e-5, rtol=1e-5)


def test_wider_images_and_large_products_keep_the_convolution(monkeypatch):
    from fuselint.backend import squeeze_excite

    torch.manual_seed(0)
    conv = nn.Conv2d(32, 8, 1).eval().to(BF16)
    _, reports = _run(conv, torch.randn(2, 32, 3, 3, dtype=BF16))
    assert [r.reduced for r in reports] == [0]  # a 3x3 image: an ordinary 1x1 convolution
    monkeypatch.setattr(squeeze_excite, "MAX_MACS", 2 * 32 * 8 - 1)
    _, reports = _run(conv, torch.randn(2, 32, 1, 1, dtype=BF16))
    assert [r.reduced for r in reports] == [0]


def test_a_gate_whose_product_feeds_the_next_convolution_is_still_not_rounded():
    # EfficientNet's and MobileNetV3's gated image goes into the projecting 1x1 convolution:
    # the chain from `expand` reaches a library call only through the full-size multiply, where
    # a 16-bit gate would round the image's scale, so `expand` keeps its library call
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.se = SqueezeExcite(64, 16)
            self.project = nn.Conv2d(64, 32, 1, bias=False)

        def forward(self, x):
            return self.project(self.se(x))

    torch.manual_seed(0)
    model = Block().eval().to(BF16)
    x = torch.randn(2, 64, 4, 4, dtype=BF16)
    got, reports = _run(model, x)
    assert [r.reduced for r in reports] == [1]
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), **tol(BF16))


def _tf32_reference(value: float) -> float:
    """`value` (a float32) rounded to TF32 by hand: the nearer of the two 10-bit-mantissa neighbours,
    the one whose last kept bit is 0 on a tie."""
    import math
    import struct

    if math.isnan(value) or math.isinf(value):
        return value
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    low = bits & ~0x1FFF
    high = low + 0x2000
    dropped = bits & 0x1FFF
    if dropped > 0x1000 or (dropped == 0x1000 and low & 0x2000):
        low = high
    if (low & 0x7F800000) == 0x7F800000:  # rounded past the largest finite value
        return math.copysign(math.inf, value)
    return struct.unpack("<f", struct.pack("<I", low))[0]


def _hard_values() -> torch.Tensor:
    torch.manual_seed(0)
    spread = torch.randn(4000) * torch.exp2(torch.randint(-140, 128, (4000,)).float())
    ties = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), -(1 + 3 * 2**-11), 2**-130 * 3])
    edges = torch.tensor([0.0, -0.0, 1e-45, -1e-45, 3.4028234663852886e38, float("inf"), float("-inf")])
    return torch.cat([spread, ties, edges, torch.full((1,), float("nan"))]).float()


def test_round_to_tf32_rounds_to_the_nearest_even_ten_bit_mantissa():
    from fuselint.backend.squeeze_excite import round_to_tf32

    x = _hard_values()
    got = round_to_tf32(x)
    want = torch.tensor([_tf32_reference(v) for v in x.tolist()], dtype=torch.float32)
    assert torch.equal(got.isnan(), want.isnan())
    keep = ~want.isnan()
    assert torch.equal(got[keep].view(torch.int32), want[keep].view(torch.int32))


def test_the_kernel_rounds_to_tf32_bit_for_bit_as_the_op_does():
    from fuselint.backend.squeeze_excite import round_to_tf32

    x = _hard_values()
    got, reports = _run(lambda x: torch.ops.fuselint.round_to_tf32(x) * 1.0, x)
    assert [len(r.kernels) for r in reports] == [1] and not reports[0].fallbacks
    want = round_to_tf32(x)
    assert torch.equal(got.isnan(), want.isnan())
    keep = ~want.isnan()
    assert torch.equal(got[keep].view(torch.int32), want[keep].view(torch.int32))


def _tf32_flag(allowed: bool, cudnn: bool = True):
    c = torch.backends.cudnn
    return c.flags(enabled=cudnn, benchmark=c.benchmark, deterministic=c.deterministic, allow_tf32=allowed)


def test_float32_gates_round_as_cudnn_s_tf32_setting_says_at_each_call(monkeypatch):
    """Where cuDNN would run the gate's float32 convolution in TF32, the reduction rounds its
    operands as cuDNN does; a call after the setting changed runs the graph compiled for the new
    one, and back (a CPU stands in for the GPU here: TF32_DEVICES)."""
    from fuselint.backend import squeeze_excite

    monkeypatch.setattr(squeeze_excite, "TF32_DEVICES", ("cuda", "cpu"))
    torch.manual_seed(0)
    model = SqueezeExcite(64, 16).eval()
    x = torch.randn(2, 64, 4, 4) * 3

    def reference(rounded: bool):
        r = squeeze_excite.round_to_tf32 if rounded else (lambda t: t)
        s = x.mean((2, 3), keepdim=True)
        reduced = F.conv2d(r(s), r(model.reduce.weight), model.reduce.bias)
        return x * torch.sigmoid(model.expand(F.silu(reduced)))

    torch._dynamo.reset()
    start = history_mark()
    compiled = torch.compile(model, backend=fuselint_backend, dynamic=False)
    with torch.no_grad():
        rounded, exact = reference(True), reference(False)
        assert (rounded - exact).abs().max() > 1e-4  # the rounding shows
        with _tf32_flag(True):
            first = compiled(x)
        with _tf32_flag(False):
            second = compiled(x)
        with _tf32_flag(True):
            third = compiled(x)
        with _tf32_flag(True, cudnn=False):  # ATen's own convolution: no TF32 from cuDNN
            fourth = compiled(x)
    reports = reports_since(start)
    torch.testing.assert_close(first, rounded, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(second, exact, atol=2e-6, rtol=1e-5)
    assert torch.equal(first, third) and torch.equal(second, fourth)
    # compiled once per setting: the first for TF32, the second when the setting changed
    assert [(r.reduced, r.conv_tf32) for r in reports] == [(1, True), (1, False)]


def test_a_gate_on_a_device_without_tf32_keeps_its_exact_sums():
    torch.manual_seed(0)
    model = SqueezeExcite(64, 16).eval()
    with _tf32_flag(True):
        _, reports = _run(model, torch.randn(2, 64, 4, 4))
    assert [(r.reduced, r.conv_tf32) for r in reports] == [(1, None)]


def test_which_graphs_may_follow_the_tf32_setting(monkeypatch):
    """Asked before compiling: a float32 convolution of a 1x1 image on a device whose TF32 setting
    counts; a wider image, a bf16 one, or (on a CPU) a device without TF32 does not."""
    from fuselint.backend import squeeze_excite

    w, b = torch.randn(8, 32, 1, 1), torch.randn(8)
    pooled, wide = torch.randn(2, 32, 1, 1), torch.randn(2, 32, 3, 3)

    def follows(x, dtype=torch.float32):
        return squeeze_excite.follows_tf32(aten_graph(F.conv2d, x.to(dtype), w.to(dtype), b.to(dtype)))

    assert not follows(pooled)  # a CPU: no TF32
    monkeypatch.setattr(squeeze_excite, "TF32_DEVICES", ("cuda", "cpu"))
    assert follows(pooled)
    assert not follows(wide)
    assert not follows(pooled, BF16)


def test_a_data_sized_graph_s_gates_follow_the_tf32_setting_too(monkeypatch):
    """A graph with a data-sized node compiles its static pieces as graphs of their own: the TF32
    setting a piece's gate follows is the whole graph's, so a call under the other setting compiles
    again (without it, the second call still rounded)."""
    from fuselint.backend import squeeze_excite

    class GateAndNonzero(SqueezeExcite):
        def forward(self, x):
            return super().forward(x), torch.nonzero(x > 0)

    monkeypatch.setattr(squeeze_excite, "TF32_DEVICES", ("cuda", "cpu"))
    torch.manual_seed(0)
    model = GateAndNonzero(64, 16).eval()
    x = torch.randn(2, 64, 4, 4) * 3
    torch._dynamo.reset()
    start = history_mark()
    compiled = torch.compile(model, backend=fuselint_backend, dynamic=False)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True), torch.no_grad():
        with _tf32_flag(True):
            first = compiled(x)[0]
        with _tf32_flag(False):
            second, where = compiled(x)
        exact = model(x)[0]
    assert torch.equal(where, torch.nonzero(x > 0))
    assert (first - exact).abs().max() > 1e-4  # rounded under TF32
    torch.testing.assert_close(second, exact, atol=2e-6, rtol=1e-5)
    assert [r.conv_tf32 for r in reports_since(start)] == [True, False]
