"""The cost model prices eager and planned execution from the same plan."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from fusion_capture import aten_graph, traced_reference
from fusion_references import REFERENCES

from fuselint.fusion.attention import eager_call
from fuselint.fusion.cost import (
    Cost,
    cost_by_class,
    eager_kernels,
    eager_mask_share,
    eager_unvectorised,
    graph_cost,
    model_cost,
    nchw_conv_extra,
    sdpa_calls,
)
from fuselint.fusion.devices import DEVICES, H200, Device, calibrate, device
from fuselint.fusion.plan import GraphFacts, plan
from fuselint.fusion.summary import plan_summary
from fuselint.graph.eager_probe import EagerSdpa

UNIT = Device("unit", bandwidth_gbs=1.0, fp32_tflops=1.0, half_tflops=2.0, launch_us=10.0, source="test")


def test_eager_moves_every_intermediate_and_the_plan_only_its_boundary():
    n = 64 * 32
    cost = graph_cost(plan(aten_graph(lambda x: torch.sin(torch.cos(x)), torch.randn(64, 32))), UNIT)
    assert cost.eager.launches == 2 and cost.eager.bytes == 4 * n * 4  # cos: r+w, sin: r+w
    assert cost.fused.launches == 1 and cost.fused.bytes == 2 * n * 4
    assert cost.saving == Cost(1, 2 * n * 4, 0, cost.eager.time_us - cost.fused.time_us)


def test_time_is_roofline_plus_launches():
    # 1 GB/s = 1000 bytes per us; 1 TFLOP/s = 1e6 flops per us
    assert UNIT.time_us(5000, 0) == pytest.approx(5 + 10)
    assert UNIT.time_us(5000, 9e6) == pytest.approx(9 + 10)
    assert UNIT.time_us(5000, 9e6, dtype="bfloat16") == pytest.approx(5 + 10)
    assert UNIT.time_us(0, 0, launches=3) == pytest.approx(30)


def test_composite_ops_are_one_eager_kernel_and_hand_written_ones_are_not():
    x = torch.randn(16, 32)
    composite = aten_graph(lambda x: torch.softmax(x, -1), x)
    manual = aten_graph(REFERENCES["softmax"][0]()[0], x)
    assert len(eager_kernels(GraphFacts(composite))) == 1
    assert len(eager_kernels(GraphFacts(manual))) == 5
    assert graph_cost(plan(composite)).eager.launches == 1
    assert graph_cost(plan(manual)).eager.launches == 5
    assert graph_cost(plan(manual)).fused.launches == 1


def test_matmul_copies_stay_separate_eager_kernels():
    def fn(q, k):
        return q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)

    fg = aten_graph(fn, torch.randn(2, 8, 4, 8), torch.randn(2, 8, 4, 8))
    assert graph_cost(plan(fg)).eager.launches == 3  # two contiguous copies and the bmm


@pytest.mark.parametrize("name", ["conv_relu_maxpool", "convnext_block"])
def test_conv_layout_changes_the_plan_not_what_eager_costs(name):
    # Eager runs the conv with its bias in NCHW: the copies and bias add that the GPU layout
    # adds are part of that one eager kernel, and only the plan pays for them.
    fn, args = REFERENCES[name][0]()
    laid_out = graph_cost(plan(traced_reference(name)))
    as_written = graph_cost(plan(aten_graph(fn, *args, layout=False)))
    assert laid_out.eager.launches == as_written.eager.launches
    assert laid_out.eager.bytes == as_written.eager.bytes
    # the plan of the graph as written runs its conv in NCHW: cuDNN's three conversions are priced
    # there; the laid-out plan makes its copies explicit (fused into kernels or kernels of their own)
    assert as_written.fused.launches >= 1 + 3
    assert laid_out.fused.launches != as_written.fused.launches


def test_matmul_flops_come_from_the_flop_counter():
    fg = aten_graph(lambda a, b: a @ b, torch.randn(16, 32), torch.randn(32, 8))
    cost = graph_cost(plan(fg), UNIT)
    assert cost.fused.flops == 2 * 16 * 32 * 8


def test_model_cost_weights_graphs_by_calls():
    fg = traced_reference("transformer_block")
    once = graph_cost(plan(fg))
    model = model_cost([plan(fg), plan(replace(fg, calls=3))])
    assert model.eager.launches == 4 * once.eager.launches
    assert model.fused.time_us == pytest.approx(4 * once.fused.time_us)
    assert model.speedup == pytest.approx(once.speedup)
    assert model.fusible_speedup > model.speedup > 1  # matmuls gain nothing from fusion


def test_group_costs_add_up_to_the_graph():
    cost = graph_cost(plan(traced_reference("transformer_block")))
    assert sum(g.eager.launches for g in cost.groups) == cost.eager.launches == 21
    assert sum(g.fused.bytes for g in cost.groups) == cost.fused.bytes
    assert cost.fused.launches == 13


def test_calibrate_replaces_bandwidth_and_launch_cost():
    d = calibrate(H200, copy_bytes=2e9, copy_us=1e3, launch_us=2.5)
    assert d.bandwidth_gbs == pytest.approx(2000.0)
    assert d.launch_us == 2.5 and d.fp32_tflops == H200.fp32_tflops
    assert "calibrated" in d.source
    with pytest.raises(ValueError):
        calibrate(H200, copy_bytes=1, copy_us=0)


def test_device_table_has_the_gpus_we_price_for():
    assert {"H200", "H100 SXM", "A100 80GB", "L4"} <= set(DEVICES)
    assert device("h100") is DEVICES["H100 SXM"] and device("a100-80gb") is DEVICES["A100 80GB"]
    assert 4140 <= H200.bandwidth_gbs <= 4300 and H200.launch_us == 4.0
    with pytest.raises(KeyError):
        device("tpu")


def test_summary_is_json_with_node_colours():
    p = plan(traced_reference("transformer_block"))
    s = json.loads(json.dumps(plan_summary(p)))
    assert s["eager"]["launches"] == 21 and s["fused"]["launches"] == 13
    assert [g["id"] for g in s["groups"]] == list(range(13))
    compute = [n for n, d in p.graph.dag.nodes(data=True) if d["kind"] not in ("input", "view")]
    assert all(n in s["node_group"] for n in compute)
    assert s["node_group"]["add_6"] == 12 and s["node_group"]["add_2"] == 8
    assert s["groups"][4]["kind"] == "reduction" and s["groups"][4]["space"] == [64, 8]


def test_bf16_halves_bytes():
    x = torch.randn(64, 32)
    f32 = graph_cost(plan(aten_graph(F.silu, x)))
    bf16 = graph_cost(plan(aten_graph(F.silu, x.bfloat16())))
    assert bf16.fused.bytes * 2 == f32.fused.bytes


def _meta(*shape):
    return torch.empty(*shape, device="meta")


_N = 8192


def _residual_layernorm(x, r, w, b):
    h = x + r
    return h, F.layer_norm(h, (_N,), w, b)


# KNOWLEDGE.md "Measured anchors" (H200, torch 2.11, 8192x8192 fp32, ms): (fn, inputs, eager, inductor)
H200_ANCHORS = {
    "cos_sin": (lambda x: torch.sin(torch.cos(x)), (_N, _N), 0.262, 0.139),
    "bias_gelu_residual": (lambda x, b, r: F.gelu(x + b) + r, ((_N, _N), (_N,), (_N, _N)), 0.511, 0.189),
    "silu_mul": (lambda a, b: F.silu(a) * b, ((_N, _N), (_N, _N)), 0.319, 0.189),
    "manual_tanh_gelu": (
        lambda x: 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3))),
        (_N, _N),
        1.152,
        0.131,
    ),
    "manual_softmax": (REFERENCES["softmax"][0]()[0], (_N, _N), 0.737, 0.130),
    "residual_layernorm": (
        _residual_layernorm,
        ((_N, _N), (_N, _N), (_N,), (_N,)),
        0.408,
        0.276,
    ),
}


@pytest.mark.parametrize("name", sorted(H200_ANCHORS))
def test_predictions_match_measured_h200_anchors(name):
    fn, shapes, eager_ms, inductor_ms = H200_ANCHORS[name]
    shapes = shapes if isinstance(shapes[0], tuple) else (shapes,)
    cost = graph_cost(plan(aten_graph(fn, *[_meta(*s) for s in shapes])), H200)
    # the plan's time is what a roofline kernel per group takes: Inductor gets within 10% of it
    assert cost.fused.time_us / 1e3 == pytest.approx(inductor_ms, rel=0.10)
    # eager pointwise ops run at copy bandwidth; eager reductions and broadcasts run slower
    # than the model says (softmax 0.72x, layer norm 0.80x of measured), never faster
    if name in ("cos_sin", "bias_gelu_residual", "silu_mul", "manual_tanh_gelu"):
        assert cost.eager.time_us / 1e3 == pytest.approx(eager_ms, rel=0.12)
    else:
        assert 0.65 * eager_ms < cost.eager.time_us / 1e3 < eager_ms


class _DropoutBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        y = self.drop(torch.relu(x))  # nn.Dropout: F.dropout
        z = F.dropout2d(y, 0.2, training=self.training)
        return torch.dropout(z, 0.3, False) + 1, x.clone()


def test_eval_dropout_is_no_eager_kernel():
    # In eager an eval-mode dropout returns its input: no kernel, where the traced graph
    # holds a clone. A clone the user wrote is still one.
    x = torch.randn(8, 4, 16, 16)
    block = _DropoutBlock().eval()
    y = block.drop(x)
    assert y is x and F.dropout2d(x, 0.2, training=False) is x and torch.dropout(x, 0.3, False) is x
    fg = aten_graph(block, x)
    clones = [n for n in fg.gm.graph.nodes if n.target is torch.ops.aten.clone.default]
    assert len(clones) == 3  # nn.Dropout's, torch.dropout's (dynamo drops dropout2d) and the user's
    cost = graph_cost(plan(fg), UNIT)
    assert cost.eager.launches == 3  # relu, the user's clone, + 1
    n = x.numel() * 4
    assert cost.eager.bytes == 2 * n + 2 * n + 2 * n


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3, padding=1)  # biased: 3 conversions + a bias kernel
        self.dw = torch.nn.Conv2d(
            16, 16, 3, padding=1, groups=16, bias=False
        )  # PyTorch's NCHW kernel: its taps
        self.se = torch.nn.Conv2d(16, 16, 1)  # on a 1x1 image: its bias kernel alone

    def forward(self, x):
        h = self.dw(self.conv(x))
        return h * self.se(h.mean((2, 3), keepdim=True))


def _conv_extra(fg) -> Cost:
    facts = GraphFacts(fg)
    return sum((nchw_conv_extra(facts, unit, UNIT) for unit in eager_kernels(facts)), Cost())


def test_eager_convs_pay_cudnns_layout_copies_and_bias_kernel():
    x = torch.randn(4, 8, 32, 32)
    y = 4 * 16 * 32 * 32 * 4  # the conv's output (and the depthwise conv's), bytes
    se = 2 * 4 * 16 * 4  # the squeeze-excite conv's bias kernel: its (4, 16, 1, 1) output, read + written
    # NCHW: the conv's input, weight and output converted, and its bias kernel; the depthwise
    # conv's untiled taps (9 per output where the roofline reads its input once)
    nchw = _conv_extra(aten_graph(_ConvNet().eval(), x))
    assert nchw.launches == 3 + 1 + 1
    assert nchw.bytes == 2 * (x.numel() * 4 + 16 * 8 * 9 * 4 + y) + 2 * y + se + (9 - 1) * y
    # the user's model in channels_last: no copies, the bias kernels stay
    cl_model = _ConvNet().eval().to(memory_format=torch.channels_last)
    cl = _conv_extra(aten_graph(cl_model, x.to(memory_format=torch.channels_last)))
    assert cl.launches == 2 and cl.bytes == 2 * y + se
    # channels_last weights, NCHW image: cuDNN copies the image into channels_last first
    mixed = _conv_extra(aten_graph(cl_model, x))
    assert mixed.launches == 3 and mixed.bytes == 2 * x.numel() * 4 + 2 * y + se
    facts = GraphFacts(aten_graph(torch.nn.Linear(8, 8), torch.randn(2, 8)))
    assert _conv_extra(facts.fg) == Cost()


def test_a_swept_device_prices_depthwise_convs_by_layout_and_small_matmuls_below_peak():
    # H200-measured carries the efficiency sweep: eager runs an NCHW depthwise conv in PyTorch's
    # own kernel (swept at ~1.8 TFLOP/s in bf16), far slower than the roofline, and the plan
    # runs it in channels_last through cuDNN (~9); a small matmul runs below the peak rate.
    swept = device("H200-measured")
    plain = replace(swept, efficiency=None)
    dw = torch.nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False).eval().to(torch.bfloat16)
    fg = aten_graph(dw, torch.randn(8, 64, 56, 56, dtype=torch.bfloat16))
    with_sweep, roofline = graph_cost(plan(fg), swept), graph_cost(plan(fg), plain)
    flops = 2 * 8 * 64 * 56 * 56 * 9
    assert with_sweep.eager.time_us > 0.8 * flops / 1.9e6  # at the swept NCHW rate
    assert with_sweep.eager.time_us > 3 * roofline.eager.time_us
    mm = aten_graph(lambda a, b: a @ b, torch.randn(256, 64), torch.randn(64, 64))
    assert graph_cost(plan(mm), swept).eager.time_us > graph_cost(plan(mm), plain).eager.time_us


def test_a_swept_device_prices_eager_batch_norm_at_its_measured_rate():
    # PyTorch's NCHW inference BatchNorm runs plane by plane, well below copy bandwidth (H200
    # sweep: ~2000 GB/s at 26 MB over 56x56 planes); channels_last runs faster; the plan is unchanged.
    swept = device("H200-measured")
    plain = replace(swept, efficiency=None)
    bn = torch.nn.BatchNorm2d(64).eval().to(torch.bfloat16)
    x = torch.randn(32, 64, 56, 56, dtype=torch.bfloat16)
    nchw = plan(aten_graph(bn, x))
    cl = plan(aten_graph(bn, x.to(memory_format=torch.channels_last)))
    moved = 2 * x.numel() * 2
    assert graph_cost(nchw, swept).eager.time_us > 1.5 * graph_cost(nchw, plain).eager.time_us
    assert graph_cost(nchw, swept).eager.time_us > moved / 2.5e6  # slower than 2500 GB/s
    assert graph_cost(cl, swept).eager.time_us < graph_cost(nchw, swept).eager.time_us
    assert graph_cost(nchw, swept).fused.time_us == pytest.approx(
        graph_cost(nchw, plain).fused.time_us, rel=0.2
    )


def test_eager_batch_norm_after_a_conv_is_priced_in_eagers_layout_not_the_layout_passs():
    # The layout pass runs the conv (and so the BatchNorm after it) in channels_last for the plan;
    # eager keeps the user's NCHW and runs PyTorch's NCHW BatchNorm kernel, 1.56x slower on the H200
    # sweep at 32x256x56x56 (measured on the H200 in ResNet-50: 1134 µs for its 53, 1311 priced
    # this way, 761 as channels_last).
    swept = device("H200-measured")
    body = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 1), torch.nn.BatchNorm2d(64)).eval()
    x = torch.randn(32, 64, 56, 56, dtype=torch.bfloat16)
    nchw = graph_cost(plan(aten_graph(body.to(torch.bfloat16), x, layout=False)), swept)
    laid_out_fg = aten_graph(body, x)
    convs = [n for n in laid_out_fg.dag.nodes if "convolution" in n]
    assert convs and all(
        laid_out_fg.dag.nodes[c]["fx"].meta["val"].is_contiguous(memory_format=torch.channels_last)
        for c in convs
    ), "the layout pass made the graph channels_last"
    laid_out = graph_cost(plan(laid_out_fg), swept)
    assert laid_out.eager.time_us == pytest.approx(nchw.eager.time_us, rel=0.02)
    cl_model = body.to(memory_format=torch.channels_last)
    cl = graph_cost(plan(aten_graph(cl_model, x.to(memory_format=torch.channels_last))), swept)
    assert cl.eager.time_us < 0.85 * laid_out.eager.time_us  # eager in channels_last: the fast kernel


def test_a_swept_device_prices_eager_layer_norm_per_row_and_small_convs_above_their_gemm():
    # PyTorch's eager LayerNorm runs a block per row: over ConvNeXt's 96-wide rows it takes several
    # times the copy time (H200: 836 µs for ConvNeXt-T's 23 LayerNorms); the plan's own kernel is
    # priced as before. A 16-channel 3x3 convolution runs at the time swept for its shape, several
    # times its GEMM's (4.5x on the H200 at 112x112), in eager and in the plan.
    swept = device("H200-measured")
    plain = replace(swept, efficiency=replace(swept.efficiency, layer_norm=(), dense_conv=()))
    ln = torch.nn.LayerNorm(96).to(torch.bfloat16)
    rows = plan(aten_graph(ln, torch.randn(8, 56, 56, 96, dtype=torch.bfloat16)))
    assert graph_cost(rows, swept).eager.time_us > 3 * graph_cost(rows, plain).eager.time_us
    assert graph_cost(rows, swept).fused == graph_cost(rows, plain).fused
    conv = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False).eval().to(torch.bfloat16)
    x = torch.randn(8, 16, 112, 112, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    small = plan(aten_graph(conv, x))
    for side in ("eager", "fused"):
        assert (
            getattr(graph_cost(small, swept), side).time_us
            > 2 * getattr(graph_cost(small, plain), side).time_us
        )


def test_compiled_convs_left_in_nchw_pay_cudnns_conversions_in_the_plan():
    # Inductor's layout rule keeps a graph of grouped convolutions in NCHW; cuDNN then converts
    # input, weight and output around each, in the compiled run as in eager (RegNet measured 405
    # conversion kernels per call under fuselint on the H200). A channels_last plan pays none.
    x = torch.randn(4, 32, 16, 16)
    grouped = plan(aten_graph(torch.nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=False).eval(), x))
    dense = plan(aten_graph(torch.nn.Conv2d(32, 96, 3, padding=1, bias=False).eval(), x))
    assert graph_cost(grouped, UNIT).fused.launches == 1 + 3

    def conversions(p):
        facts = GraphFacts(p.graph)
        return nchw_conv_extra(facts, set(facts.kind), UNIT, compiled=True).launches

    assert conversions(grouped) == 3 and conversions(dense) == 0  # its copies are the plan's own


def _unvectorised(fn, *args) -> list:
    facts = GraphFacts(aten_graph(fn, *args))
    return sorted(str(eager_unvectorised(facts, unit)) for unit in eager_kernels(facts))


def test_eager_ops_on_broadcast_or_strided_operands_run_unvectorised():
    # TensorIterator vectorises only operands laid out like the output; cat copies non-contiguous
    # inputs element by element (H200: ~1.3-1.7 TB/s and ~0.6 TB/s against ~4 vectorised)
    x, s = torch.randn(8, 64, 32, 32), torch.randn(8, 64, 1, 1)
    assert _unvectorised(lambda a, b: a * b, x, s) == ["elementwise"]
    assert _unvectorised(lambda a, b: a + b, x, x.clone()) == ["None"]
    assert _unvectorised(lambda a: a.permute(0, 2, 3, 1) + 1, x) == ["None"]  # one operand: its layout
    assert _unvectorised(lambda a, b: a.permute(0, 2, 3, 1) + b, x, torch.randn(8, 32, 32, 64)) == [
        "permuted"
    ]
    q = torch.randn(4, 16, 128, 64)
    halves = _unvectorised(lambda a: torch.cat((-a[..., 32:], a[..., :32]), dim=-1), q)
    assert halves.count("cat") == 1
    assert _unvectorised(lambda a, b: torch.cat((a, b), dim=0), q, q.clone()) == ["None"]
    swept = device("H200-measured")
    plain = replace(swept, efficiency=replace(swept.efficiency, strided=()))
    xb, sb = (
        torch.randn(32, 256, 56, 56, dtype=torch.bfloat16),
        torch.randn(32, 256, 1, 1, dtype=torch.bfloat16),
    )
    scaled = plan(aten_graph(lambda a, b: a * b, xb, sb))
    assert graph_cost(scaled, swept).eager.time_us > 2 * graph_cost(scaled, plain).eager.time_us
    assert graph_cost(scaled, swept).fused == graph_cost(scaled, plain).fused  # the plan's own kernel


def test_erf_gelu_is_priced_compute_bound():
    # GELU(erf) kernels run at 650-740 G elements/s on the H200 (PyTorch's and fuselint's), below
    # the ~1000 G elements/s that copy bandwidth allows for bf16
    x = torch.randn(64, 1024, 3072, dtype=torch.bfloat16)
    cost = graph_cost(plan(aten_graph(F.gelu, x)), device("H200-measured"))
    for side in (cost.eager, cost.fused):
        assert x.numel() / 0.76e6 < side.time_us < x.numel() / 0.6e6
    tanh = graph_cost(plan(aten_graph(torch.tanh, x)), device("H200-measured"))
    assert tanh.eager.time_us < x.numel() / 0.9e6  # an ordinary op stays bandwidth-bound


def test_image_stems_and_broadcast_reading_kernels_take_their_measured_rates():
    # A 3-channel stem runs cuDNN's kernels for few channels, far below its GEMM's rate, in eager
    # and in the plan (H200: EfficientNet-B0's 3x3 stem 107.8 µs, priced ~60 as a 16-channel conv); a
    # 16-channel conv is no stem. The plan's BatchNorm reads its per-channel vectors through a
    # broadcast and pays the table's factor (ResNet-50's 49 such kernels: 485 µs vs 417 priced);
    # a kernel of same-shaped operands does not.
    swept = device("H200-measured")
    plain = replace(swept, efficiency=replace(swept.efficiency, stem=(), broadcast=0.0))
    x = torch.randn(8, 3, 224, 224, dtype=torch.bfloat16)
    stem = plan(aten_graph(torch.nn.Conv2d(3, 32, 3, 2, 1, bias=False).eval().to(torch.bfloat16), x))
    m = 8 * 112 * 112
    for side, layout in (("eager", "contiguous"), ("fused", "channels_last")):
        conv_us = cost_by_class([stem], swept)[side]["conv"].time_us
        assert conv_us == pytest.approx(swept.stem_us(m, 3, 32, 9, layout) + swept.launch_us, rel=1e-3)
        assert conv_us > 1.4 * cost_by_class([stem], plain)[side]["conv"].time_us
    wide = torch.randn(8, 16, 112, 112, dtype=torch.bfloat16)
    conv = plan(aten_graph(torch.nn.Conv2d(16, 32, 3, 2, 1, bias=False).eval().to(torch.bfloat16), wide))
    assert graph_cost(conv, swept) == graph_cost(conv, plain)
    bn = torch.nn.BatchNorm2d(64).eval().to(torch.bfloat16)
    normed = plan(aten_graph(bn, torch.randn(32, 64, 56, 56, dtype=torch.bfloat16)))
    assert graph_cost(normed, swept).fused.time_us == pytest.approx(
        1.13 * graph_cost(normed, plain).fused.time_us, rel=0.05
    )
    assert graph_cost(normed, swept).eager == graph_cost(normed, plain).eager
    same = plan(aten_graph(torch.add, wide, wide.clone()))
    assert graph_cost(same, swept) == graph_cost(same, plain)


def test_a_residual_across_a_permute_is_priced_at_the_permuted_rate():
    # H100 (kernel_rates.json): ConvNeXt's residual `nhwc.permute(0, 3, 1, 2) + x` runs at 717-824
    # GB/s, a per-channel scale at 1311-1696: the same bytes cost more through a permute. A slice
    # (RoPE's halves), an expanded operand, or a transpose that keeps the last dim (attention heads
    # made contiguous) reads whole rows: not a permutation.
    x = torch.randn(4, 64, 16, 16)
    assert _unvectorised(lambda a, b: a.permute(0, 3, 1, 2) + b, torch.randn(4, 16, 16, 64), x) == [
        "permuted"
    ]
    assert _unvectorised(lambda a: -a[..., 8:], x) == ["elementwise"]
    assert _unvectorised(lambda a: a.transpose(1, 2).contiguous(), x) == ["elementwise"]
    assert _unvectorised(lambda a, b: a + b.expand(4, 64, 16, 16), x, torch.randn(1, 64, 16, 16)) == [
        "elementwise"
    ]
    h100 = device("H100-measured")
    nhwc, xb = (
        torch.randn(32, 56, 56, 256, dtype=torch.bfloat16),
        torch.randn(32, 256, 56, 56, dtype=torch.bfloat16),
    )
    residual = graph_cost(plan(aten_graph(lambda a, b: a.permute(0, 3, 1, 2) + b, nhwc, xb)), h100).eager
    moved = 3 * xb.numel() * 2  # 154 MB: measured 58-240 µs at 48-197 MB, 787 GB/s
    assert residual.time_us == pytest.approx(moved / 787e3, rel=0.02)
    two = replace(h100, efficiency=replace(h100.efficiency, strided=h100.efficiency.strided[:2]))
    assert graph_cost(
        plan(aten_graph(lambda a, b: a.permute(0, 3, 1, 2) + b, nhwc, xb)), two
    ).eager.time_us < (0.6 * residual.time_us)


def test_eager_max_pool_runs_at_its_measured_rate_and_the_plans_at_bandwidth():
    # ResNet's 3x3/2 max-pool after the stem: PyTorch's kernel 106.35 µs NCHW on the H100 where
    # bandwidth says ~23; the plan's max-pool is its own kernel (not measured apart: left priced)
    h100 = device("H100-measured")
    x = torch.randn(32, 64, 112, 112, dtype=torch.bfloat16)
    pooled = plan(aten_graph(lambda a: F.max_pool2d(a, 3, 2, 1), x))
    bare = replace(h100, efficiency=replace(h100.efficiency, max_pool=()))
    cost, plain = graph_cost(pooled, h100), graph_cost(pooled, bare)
    assert cost.eager.time_us == pytest.approx(106.35, rel=0.02)
    assert cost.eager.time_us > 4 * plain.eager.time_us
    assert cost.fused == plain.fused
    cl = plan(aten_graph(lambda a: F.max_pool2d(a, 3, 2, 1), x.to(memory_format=torch.channels_last)))
    assert graph_cost(cl, h100).eager.time_us == pytest.approx(119.39, rel=0.02)


def test_causal_flash_attention_takes_the_tables_causal_rate():
    # H100 cuDNN flash, head dim 64 (kernel_rates.json): 256 x 512 tokens 46.1 µs without a mask,
    # 37.5 with is_causal (0.81x, where half the tiles would say 0.5x); 64 x 1024 causal 33.3
    h100 = device("H100-measured")

    def attention_us(shape, causal, table=h100):
        q = torch.randn(*shape, dtype=torch.bfloat16)
        g = plan(
            aten_graph(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, q, q)
        )
        return cost_by_class([g], table)["eager"]["attention"].time_us

    assert attention_us((16, 16, 512, 64), False) == pytest.approx(46.1, rel=0.15)
    assert attention_us((16, 16, 512, 64), True) == pytest.approx(37.5, rel=0.15)
    assert attention_us((4, 16, 1024, 64), True) == pytest.approx(33.3, rel=0.1)
    same = replace(h100, efficiency=replace(h100.efficiency, attention_causal=0.0))
    assert attention_us((4, 16, 1024, 64), True, same) < 0.8 * attention_us((4, 16, 1024, 64), True)


def test_mask_kernels_eager_runs_on_a_smaller_mask_cost_that_masks_size():
    # T5 under torch 2.11's compile adds the batch's attention mask to the position bias, (B, H, L, L),
    # where eager passes the bias alone, (1, H, L, L) (the eager probe's record): the graph's
    # batch-wide mask kernels run at 1/B of their size in eager, each still one launch
    b, h, n, d = 16, 8, 256, 64
    q = torch.randn(b, h, n, d, dtype=torch.bfloat16)
    bias, pad = torch.randn(1, h, n, n, dtype=torch.bfloat16), torch.randn(b, 1, 1, n, dtype=torch.bfloat16)
    g = plan(
        aten_graph(
            lambda q, bias, pad: F.scaled_dot_product_attention(q, q, q, attn_mask=bias + pad), q, bias, pad
        )
    )
    plain = cost_by_class([g], H200)["eager"]
    g.graph.eager_sdpa = (
        EagerSdpa(
            (b, h, n, d),
            (b, h, n, d),
            torch.bfloat16,
            ((1, h, n, n), (h * n * n, n * n, n, 1), torch.bfloat16),
            False,
        ),
    )
    facts = GraphFacts(g.graph)
    compiled = sdpa_calls(facts)
    share = eager_mask_share(
        facts, compiled, {c: eager_call(k, g.graph.eager_sdpa) for c, k in compiled.items()}
    )
    assert share and set(share.values()) == {1 / b}
    assert all(tuple(facts.shape[c]) == (b, h, n, n) for c in share)
    probed = cost_by_class([g], H200)["eager"]
    assert probed["other"].launches == plain["other"].launches
    assert probed["other"].bytes == pytest.approx(plain["other"].bytes / b)
    launches = plain["other"].launches * H200.launch_us
    assert probed["other"].time_us - launches == pytest.approx((plain["other"].time_us - launches) / b)
    assert cost_by_class([g], H200)["fused"] == cost_by_class([plan(g.graph)], H200)["fused"]


def test_a_stems_image_conversions_follow_its_kernel_family():
    # H100 (kernel_rates.json, 32x3x224x224 bf16): a tensor-core stem (7x7, 16x16) on NCHW data
    # converts the 3-channel image at ~255 GB/s (ResNet 71.7 µs, ViT 79.8), and pads it (17-19 µs)
    # when it comes channels_last; a CUDA-core stem (3x3, 4x4) reads NCHW as it is: only its bias
    h100 = device("H100-measured")
    bare = replace(h100, efficiency=replace(h100.efficiency, stem_copy=()))
    x = torch.randn(32, 3, 224, 224, dtype=torch.bfloat16)

    def other(conv, table, layout=torch.contiguous_format):
        conv = conv.eval().to(torch.bfloat16).to(memory_format=layout)
        g = plan(aten_graph(conv, x.to(memory_format=layout)))
        return cost_by_class([g], table)["eager"].get("other", Cost())

    resnet = torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False)
    converted = other(resnet, h100)
    assert converted.launches == 3  # image in, weight in, output back
    assert converted.time_us - other(resnet, bare).time_us == pytest.approx(71.7 - 7, rel=0.3)
    padded = other(resnet, h100, torch.channels_last)
    assert padded.launches == 1 and padded.time_us == pytest.approx(17.3, rel=0.15)
    effnet = torch.nn.Conv2d(3, 32, 3, 2, 1, bias=False)
    assert other(effnet, h100).launches == 0 < other(effnet, bare).launches
    convnext = torch.nn.Conv2d(3, 96, 4, 4)
    assert other(convnext, h100).launches == 1  # the bias kernel (26.1 µs measured)
    assert other(convnext, h100).time_us == pytest.approx(26.1, rel=0.15)


def test_a_squeeze_excite_mean_over_a_channels_last_image_takes_the_outer_reduction_factor():
    # H100 (kernel_rates.json, fuselint's BatchNorm + SiLU + spatial mean over 32x144x56x56 bf16):
    # 28.1 µs on channels_last data (H x W is a column there), 21.0 on NCHW (a row)
    h100 = device("H100-measured")
    bare = replace(h100, efficiency=replace(h100.efficiency, outer_reduction=0.0))

    class SiLUAndMean(torch.nn.Module):
        def forward(self, x):
            y = F.silu(x)
            return y, y.mean((2, 3), keepdim=True)

    model = torch.nn.Sequential(torch.nn.BatchNorm2d(144), SiLUAndMean()).eval().to(torch.bfloat16)
    x = torch.randn(32, 144, 56, 56, dtype=torch.bfloat16)
    cl = plan(aten_graph(model, x.to(memory_format=torch.channels_last)))
    rows = plan(aten_graph(model, x))
    assert graph_cost(cl, h100).fused.time_us == pytest.approx(28.1, rel=0.05)
    assert graph_cost(rows, h100).fused.time_us == pytest.approx(21.0, rel=0.05)
    assert graph_cost(rows, h100) == graph_cost(rows, bare)
    assert graph_cost(cl, h100).eager == graph_cost(cl, bare).eager  # eager runs its own kernels
    # a reduction over the channels of a channels_last image reads rows: no factor
    over_c = plan(aten_graph(lambda a: a.sum(1), x.to(memory_format=torch.channels_last)))
    assert graph_cost(over_c, h100) == graph_cost(over_c, bare)
