"""Generated kernels against ATen, kernel kind by kernel kind, under the CPU interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import DTYPES, aten_graph, flat, needs_interpreter, tol

from fuselint.backend.codegen import index_expr
from fuselint.backend.compiler import build_kernel, compile_graph, prepare_group
from fuselint.backend.heuristics import _unsplit_config, choose_config
from fuselint.backend.lowering import Unsupported

pytestmark = needs_interpreter


def run_group(fn, args, names=None, max_persistent=None):
    """Compile one group of fn's ATen graph (all compute nodes by default) and run it."""
    gm = aten_graph(fn, *args)
    compute = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    group = prepare_group(gm, tuple(names or compute))
    kernel = build_kernel(gm, group, max_persistent=max_persistent)
    env = dict(zip([n.name for n in gm.graph.nodes if n.op == "placeholder"], args))
    out = kernel(*[env[n.name] for n in group.inputs])
    return kernel, dict(zip([n.name for n in group.outputs], out)), gm


def compiled(fn, *args):
    gm = aten_graph(fn, *args)
    return compile_graph(gm, list(args))


@pytest.mark.parametrize("dtype", DTYPES)
def test_pointwise_chain_matches_eager(dtype):
    x = torch.randn(33, 65).to(dtype)
    kernel, out, _ = run_group(lambda x: torch.sin(torch.cos(x)) * 2 + 1, (x,))
    assert kernel.calls == 1
    expected = torch.sin(torch.cos(x)) * 2 + 1
    torch.testing.assert_close(next(iter(out.values())), expected, **tol(dtype))


def test_pointwise_loads_are_converted_to_fp32_and_stores_back():
    x = torch.randn(8, 8, dtype=torch.bfloat16)
    kernel, _, _ = run_group(lambda x: x * x + x, (x,))
    assert ".to(tl.float32)" in kernel.source
    assert ".to(tl.bfloat16)" in kernel.source


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_bias_and_row_vector_read_with_stride_zero(dtype):
    x, b, s = torch.randn(16, 32).to(dtype), torch.randn(32).to(dtype), torch.randn(16, 1).to(dtype)
    kernel, out, _ = run_group(lambda x, b, s: (x + b) * s, (x, b, s))
    torch.testing.assert_close(next(iter(out.values())), (x + b) * s, **tol(dtype))
    assert "% 32" in kernel.source and "// 32" in kernel.source


def test_non_contiguous_input_is_read_through_its_strides():
    x = torch.randn(24, 40).t()
    assert not x.is_contiguous()
    gm = compiled(lambda x: torch.exp(x) + 1, x)
    out = flat(gm(x))[0]
    torch.testing.assert_close(out, torch.exp(x) + 1)
    assert out.stride() == x.stride()  # eager keeps the input's layout, and so do we
    from fuselint.backend import history

    # Offsets walk memory order: the transposed input and output are read and written at xoffs.
    source = history[-1].kernels[0].source
    assert "tl.load(in0 + (xoffs)" in source and "tl.store(out0 + (xoffs)" in source


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensors_of_two_layouts_run_as_transposing_tiles(dtype):
    # NCHW beside channels_last: the tile walks C (the shorter of C and W) on its second axis,
    # so the NCHW tensors coalesce along rows (W innermost) and channels_last along the tile.
    a = torch.randn(2, 16, 6, 40).to(dtype)
    b = torch.randn(2, 16, 6, 40).to(dtype).contiguous(memory_format=torch.channels_last)
    kernel, out, _ = run_group(lambda a, b: a * 2 + b, (a, b))
    torch.testing.assert_close(next(iter(out.values())), a * 2 + b, **tol(dtype))
    assert kernel.ir.tile_dim == 1 and kernel.ir.xdims[-1] == 3
    assert "roffs" in kernel.source and "tl.store(out0" in kernel.source


def test_one_layout_stays_one_dimensional():
    a = torch.randn(2, 16, 6, 40).contiguous(memory_format=torch.channels_last)
    kernel, _, _ = run_group(lambda a: torch.relu(a) + 1, (a,))
    assert kernel.ir.tile_dim is None and kernel.ir.xdims[-1] == 1  # walks channels_last memory


def test_window_source_decides_the_order_of_a_pool_that_changes_layout():
    x = torch.randn(2, 8, 12, 12).contiguous(memory_format=torch.channels_last)

    def pool_to_nchw(x):
        return F.max_pool2d(x, 2).contiguous()

    from fuselint.backend import fuselint_backend, history

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(pool_to_nchw, backend=fuselint_backend)(x), pool_to_nchw(x))
    (kernel,) = history[-1].kernels
    # 4 taps of channels_last source per NCHW output: rows walk C, the tile walks W
    assert kernel.ir.xdims[-1] == 1 and kernel.ir.tile_dim == 3


def test_mean_over_h_and_w_of_channels_last_reduces_columns_on_gpu():
    x = torch.randn(2, 64, 56, 56).contiguous(memory_format=torch.channels_last)
    gm = aten_graph(lambda x: x.mean((2, 3)), x)
    names = tuple(n.name for n in gm.graph.nodes if n.op == "call_function")
    from fuselint.backend.lowering import lower_group

    group = prepare_group(gm, names)
    ir = lower_group(group.nodes, group.inputs, group.outputs)
    assert ir.contiguous_dim == 1
    cfg = _unsplit_config(ir, False, None)  # the contiguous C is tiled 64 wide, rows loop
    assert (cfg.xblock, cfg.rblock, cfg.persistent) == (64, 64, False)
    # on 2 programs: the rows are split in chunks (an outer reduction of 400K elements)
    assert cfg.grid == 2 and choose_config(ir, interpret=False).combine is not None


def test_expanded_input_has_no_index_term():
    x = torch.randn(1, 32).expand(8, 32)
    kernel, out, _ = run_group(lambda x: x * 3, (x,))
    torch.testing.assert_close(next(iter(out.values())), x * 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_is_one_kernel(dtype):
    x = torch.randn(12, 100).to(dtype)
    gm = compiled(lambda x: torch.softmax(x, -1), x)
    from fuselint.backend import history

    assert len(history[-1].kernels) == 1
    torch.testing.assert_close(flat(gm(x))[0], torch.softmax(x, -1), **tol(dtype))


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_persistent_and_looped(persistent, dtype):
    x, w, b = torch.randn(6, 96).to(dtype), torch.randn(96).to(dtype), torch.randn(96).to(dtype)

    def fn(x, w, b):
        return F.layer_norm(x, (96,), w, b)

    kernel, out, _ = run_group(fn, (x, w, b), max_persistent=None if persistent else 32)
    assert kernel.cfg.persistent is persistent
    if not persistent:
        assert "for r0 in range(0, 96, RBLOCK)" in kernel.source
    outs = [v for k, v in out.items() if v.shape == x.shape]
    torch.testing.assert_close(outs[0], fn(x, w, b), **tol(dtype))


@pytest.mark.parametrize("persistent", [True, False])
def test_softmax_looped_takes_three_passes(persistent):
    x = torch.randn(5, 200) * 4
    kernel, out, _ = run_group(
        lambda x: torch.softmax(x, -1), (x,), max_persistent=None if persistent else 64
    )
    if not persistent:
        assert "pass 3 of 3" in kernel.source
    torch.testing.assert_close(next(iter(out.values())), torch.softmax(x, -1))


def test_looped_reduction_stores_what_needs_no_reduction_in_its_first_pass():
    # SiLU's output and its mean (squeeze-excite): one read of x, not two.
    x = torch.randn(6, 300)

    def silu_and_mean(x):
        y = F.silu(x)
        return y, y.mean(-1, keepdim=True)

    kernel, out, _ = run_group(silu_and_mean, (x,), max_persistent=64)
    assert "pass 1 of 1" in kernel.source and "recompute" not in kernel.source
    y, m = silu_and_mean(x)
    torch.testing.assert_close(sorted(out.values(), key=lambda t: -t.numel()), [y, m])


@pytest.mark.parametrize("max_persistent", [None, 8])
def test_reduction_over_dim_zero(max_persistent):
    x = torch.randn(40, 24)
    kernel, out, _ = run_group(lambda x: (x * 2).sum(0), (x,), max_persistent=max_persistent)
    torch.testing.assert_close(next(iter(out.values())), (x * 2).sum(0))


def test_reduction_over_middle_dim_with_epilogue():
    x = torch.randn(4, 30, 6)
    fn = lambda x: x / x.abs().amax(1, keepdim=True)  # noqa: E731
    gm = compiled(fn, x)
    torch.testing.assert_close(flat(gm(x))[0], fn(x))


def test_several_outputs_of_one_kernel():
    x, r = torch.randn(8, 64), torch.randn(8, 64)

    def fn(x, r):
        h = x + r
        return h, F.layer_norm(h, (64,)), h.mean(-1)

    gm = compiled(fn, x, r)
    from fuselint.backend import history

    assert len(history[-1].kernels) == 1
    assert len(history[-1].kernels[0].ir.outputs) >= 3
    for got, want in zip(flat(gm(x, r)), fn(x, r)):
        torch.testing.assert_close(got, want)


def test_var_mean_with_correction_and_full_reduction():
    x = torch.randn(7, 50)

    def fn(x):
        v, m = torch.var_mean(x, -1, correction=1)
        return v, m, x.sum(), torch.var(x)

    gm = compiled(fn, x)
    for got, want in zip(flat(gm(x)), fn(x)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


OPS = {
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu_mul": lambda x: F.silu(x) * x,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "relu_clamp": lambda x: F.relu(x).clamp(max=0.5) + x.clamp(-0.2, 0.2),
    "where_cmp": lambda x: torch.where(x > 0, x, -x * 0.5) + (x <= 0.1).float(),
    "pow_sqrt": lambda x: x.pow(3) + x.abs().sqrt() + x.abs().pow(1.5) + torch.rsqrt(x.abs() + 1),
    "log_exp2": lambda x: torch.log(x.abs() + 1) + torch.exp2(x) + torch.log1p(x.abs()) + torch.expm1(x),
    "min_max": lambda x: torch.maximum(x, x * 0.3) + torch.minimum(x, torch.zeros_like(x)),
    "erf_neg_recip": lambda x: torch.erf(-x) + 1 / (x.abs() + 1) + torch.sign(x),
    "floor_ceil": lambda x: torch.floor(x * 3) + torch.ceil(x * 3),
    "full_like": lambda x: x + torch.full_like(x, 2.5),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_table_entry_matches_eager(name):
    x = torch.randn(16, 16) * 2
    fn = OPS[name]
    gm = compiled(fn, x)
    from fuselint.backend import history

    assert len(history[-1].kernels) == 1 and not history[-1].fallbacks, history[-1].fallbacks
    torch.testing.assert_close(flat(gm(x))[0], fn(x), atol=1e-5, rtol=1e-5)


def test_integer_and_bool_values():
    x = torch.randint(-5, 5, (8, 8))
    fn = lambda x: ((x * 2 + 1) > 0) & (x != 3)  # noqa: E731
    gm = compiled(fn, x)
    assert torch.equal(flat(gm(x))[0], fn(x))


def test_index_expr_merges_contiguous_dims():
    assert index_expr((4, 8), (0, 1), (8, 1), "xoffs") == "xoffs"
    assert index_expr((4, 8), (0, 1), (0, 1), "xoffs") == "(xoffs % 8)"
    assert index_expr((4, 8), (0, 1), (1, 0), "xoffs") == "(xoffs // 8)"
    assert index_expr((4, 8), (0, 1), (1, 4), "xoffs") == "(xoffs // 8) + (xoffs % 8) * 4"
    assert index_expr((2, 3, 4), (0, 1, 2), (12, 4, 1), "xoffs") == "xoffs"
    assert index_expr((2, 3, 4), (0, 2), (12, 4, 1), "xoffs") == "(xoffs // 4) * 12 + (xoffs % 4)"


def test_unsupported_op_raises_unsupported():
    x = torch.randn(8, 8)
    gm = aten_graph(lambda x: torch.cumsum(x, 1) + 1, x)
    names = tuple(n.name for n in gm.graph.nodes if n.op == "call_function")
    group = prepare_group(gm, names)
    with pytest.raises(Unsupported):
        build_kernel(gm, group)


def test_heuristics_row_kernel_on_gpu_sizes():
    x = torch.randn(8, 8)
    _, _, gm = run_group(lambda x: torch.softmax(x, -1), (x,))
    from fuselint.backend.lowering import lower_group

    names = tuple(n.name for n in gm.graph.nodes if n.op == "call_function")
    group = prepare_group(gm, names)
    ir = lower_group(group.nodes, group.inputs, group.outputs)
    ir.space = (8192, 8192)
    cfg = choose_config(ir, interpret=False)
    assert (cfg.xblock, cfg.rblock, cfg.persistent, cfg.num_warps, cfg.grid) == (1, 8192, True, 8, 8192)
    ir.space = (8192, 65536)
    assert choose_config(ir, interpret=False).persistent is False


def _gpu_config(fn, *args):
    from fuselint.backend.lowering import lower_group

    gm = aten_graph(fn, *args)
    group = prepare_group(gm, tuple(n.name for n in gm.graph.nodes if n.op == "call_function"))
    return choose_config(lower_group(group.nodes, group.inputs, group.outputs), interpret=False)


@pytest.mark.parametrize(
    ("width", "dtype", "warps"),
    [(192, torch.float32, 2), (384, torch.float32, 4), (192, torch.bfloat16, 1), (512, torch.bfloat16, 2)],
)
def test_short_rows_that_read_a_weight_keep_their_warps_along_the_row(width, dtype, warps):
    """Several LayerNorm rows a program: no more warps than a row's 16-byte vectors fill, where
    8 warps split the rows and Triton converts the weight's layout through shared memory
    (ConvNeXt's 25088 rows of 192 float32: 19.9 µs against 7.6, heuristics.VECTOR_WARP_BYTES)."""
    x = torch.randn(25088, width).to(dtype)
    w, b = torch.randn(width).to(dtype), torch.randn(width).to(dtype)
    cfg = _gpu_config(lambda x, w, b: F.layer_norm(x, (width,), w, b), x, w, b)
    assert cfg.persistent and cfg.xblock * cfg.rblock == 2048
    assert cfg.num_warps == warps


def test_short_rows_without_a_weight_or_of_128_lanes_keep_8_warps():
    """Softmax reads no vector along its rows, and 128-lane rows converted nothing with 8 warps
    (and ran fastest with them): both keep the tile's 8 warps."""
    assert _gpu_config(lambda x: torch.softmax(x, -1), torch.randn(25088, 192)).num_warps == 8
    x, w = torch.randn(25088, 96), torch.randn(96)
    assert _gpu_config(lambda x, w: F.layer_norm(x, (96,), w), x, w).num_warps == 8


def test_int64_offsets_only_when_32_bits_overflow():
    from fuselint.backend.codegen import generate
    from fuselint.backend.lowering import lower_group

    def source_for(shape):
        x = torch.empty(shape, device="meta")
        gm = aten_graph(lambda x: x * 2, x)
        group = prepare_group(gm, tuple(n.name for n in gm.graph.nodes if n.op == "call_function"))
        ir = lower_group(group.nodes, group.inputs, group.outputs)
        return generate(ir, choose_config(ir, interpret=False))[0]

    assert ".to(tl.int64)" not in source_for((8192, 8192))
    assert "pid = tl.program_id(0).to(tl.int64)" in source_for((65536, 65536))


PLACEMENTS = {
    "cat_last": lambda a, b, c: torch.cat([a, b, c], 1) * 2,
    "cat_first": lambda a, b, c: torch.cat([a.t(), b.t()], 0).exp(),
    "cat_strided": lambda a, b, c: torch.cat([a, b.t().contiguous().t()], 1) + 1,
    "pad_zero": lambda a, b, c: F.pad(a, (1, 2, 3, 0)) * 3,
    "pad_value": lambda a, b, c: F.pad(c, (2, 1), value=-1.5).exp(),
}


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
def test_cat_and_pad_read_inputs_shifted_and_masked(name):
    a, b, c = torch.randn(4, 8), torch.randn(4, 3), torch.randn(4, 5)
    fn = PLACEMENTS[name]
    gm = compiled(fn, a, b, c)
    from fuselint.backend import history

    assert not history[-1].fallbacks
    assert any("cat" in k.__name__ or "pad" in k.__name__ for k in history[-1].kernels)
    torch.testing.assert_close(flat(gm(a, b, c))[0], fn(a, b, c))


def test_adding_bools_is_their_or():
    # True + True is True in torch; in Triton's int1 it wraps to 0
    def either(x):
        return (x > 0) + (x > 0), (x > 0) + (x < 0.5), (x > 0) + True

    x = torch.randn(64)
    for got, want in zip(flat(compiled(either, x)(x)), either(x), strict=True):
        assert got.dtype == torch.bool and torch.equal(got, want)
