"""Split reductions (LaunchConfig.combine) against eager, on CPU through Triton's interpreter.

The interpreter splits only when FUSELINT_SPLIT_MIN_NUMEL is set; these tests set it to 1, so
every splittable reduction of these small shapes runs as chunks then their combination, with a
short last chunk where the reduced extent is not a multiple of the chunk.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import aten_graph, flat, needs_interpreter, tol

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.compiler import prepare_group
from fuselint.backend.cudagraphs import why_not_recordable
from fuselint.backend.heuristics import (
    SPLIT_MAX_PROGRAMS,
    SPLIT_OUTER_RBLOCK,
    SPLIT_TARGET_PROGRAMS,
    choose_config,
)
from fuselint.backend.lowering import lower_group

pytestmark = needs_interpreter


@pytest.fixture(autouse=True)
def force_split(monkeypatch):
    monkeypatch.setenv("FUSELINT_SPLIT_MIN_NUMEL", "1")


def run(fn, *args, train=False):
    """(compiled outputs [+ grads], eager's, the kernels launched)."""
    torch._dynamo.reset()
    start = history_mark()
    compiled = torch.compile(fn, backend=fuselint_backend)

    def outputs(f):
        leaves = [a.detach().clone().requires_grad_(train) for a in args]
        out = flat(f(*leaves))
        if not train:
            return out
        # random cotangents: sum(out)'s would make BatchNorm's weight grad a sum of ~0
        gen = torch.Generator().manual_seed(5)
        sum((o.float() * torch.randn(o.shape, generator=gen)).sum() for o in out).backward()
        return [o.detach() for o in out] + [a.grad for a in leaves]

    got, want = outputs(compiled), outputs(fn)
    kernels = [k for r in reports_since(start) for k in r.kernels if k.calls]
    return got, want, kernels


def split_kernels(kernels):
    split = [k for k in kernels if k.cfg.combine is not None]
    assert all(k.broken is None and k.fallback_calls == 0 for k in kernels)  # no ATen stood in
    return split


CASES = {
    "sum_over_rows": lambda x: x.sum(0),
    "sum_over_columns": lambda x: x.sum(1),
    "mean_both_ways": lambda x: (x.mean(0), x.mean(1, keepdim=True)),
    "amax_amin": lambda x: (x.amax(0), x.amin(1)),
    "var_mean": lambda x: torch.var_mean(x, 0, correction=1),
    "var_and_std": lambda x: (x.var(1, correction=0), x.std(0)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_split_reductions_match_eager(name, dtype):
    torch.manual_seed(0)
    x = (torch.randn(1000, 37) * 3 + 2).to(dtype)  # 1000 = 3 chunks of 256 and one of 232
    got, want, kernels = run(CASES[name], x)
    assert split_kernels(kernels), [k.cfg.describe() for k in kernels]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **tol(dtype))


def test_variance_of_chunks_combines_without_cancellation():
    # Mean 1e4, spread 1: a sum of squares minus n * mean^2 in fp32 loses every digit here;
    # Chan's combination of the chunks' own centred sums keeps fp32's precision.
    torch.manual_seed(1)
    x = torch.randn(3000, 8, dtype=torch.float64) + 1e4
    got, _, kernels = run(lambda t: torch.var_mean(t, 0), x.float())
    assert split_kernels(kernels)
    var, mean = got
    torch.testing.assert_close(var.double(), x.var(0), rtol=1e-4, atol=0)
    torch.testing.assert_close(mean.double(), x.mean(0), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_training_forward_and_backward_split_over_n_h_w(dtype):
    torch.manual_seed(0)
    # N*H*W > 8192: the planner puts the statistics in a group of their own (PlanOptions)
    x = torch.randn(4, 8, 48, 48).to(dtype).contiguous(memory_format=torch.channels_last)
    w, b = torch.rand(8).to(dtype) + 0.5, torch.randn(8).to(dtype)

    def step(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True)

    got, want, kernels = run(step, x, w, b, train=True)
    # the statistics (forward) and the per-channel sums (backward) over N, H, W are split
    split = split_kernels(kernels)
    assert len(split) >= 2, [k.cfg.describe() for k in kernels]
    assert any("var_mean" in k.__name__ for k in split)
    for g, w_ in zip(got, want, strict=True):
        torch.testing.assert_close(g, w_, **tol(dtype))


def test_batch_norm_module_updates_running_stats_as_eager():
    torch.manual_seed(0)
    x = torch.randn(4, 8, 48, 48).contiguous(memory_format=torch.channels_last)
    eager, compiled = torch.nn.BatchNorm2d(8).train(), torch.nn.BatchNorm2d(8).train()
    torch._dynamo.reset()
    fn = torch.compile(compiled, backend=fuselint_backend)
    for _ in range(2):
        torch.testing.assert_close(fn(x), eager(x), **tol(torch.float32))
    torch.testing.assert_close(compiled.running_mean, eager.running_mean, **tol(torch.float32))
    torch.testing.assert_close(compiled.running_var, eager.running_var, **tol(torch.float32))


@pytest.mark.parametrize("split", ["0", "1"])
def test_batch_norm_running_statistics_are_stored_by_the_kernels(monkeypatch, split):
    # the update of running_mean, running_var and num_batches_tracked is stored by the kernels
    # that compute it, into the module's buffers: no ATen copy_ (a launch per buffer) is left
    monkeypatch.setenv("FUSELINT_SPLIT", split)
    torch.manual_seed(0)
    eager, compiled = torch.nn.BatchNorm2d(8).train(), torch.nn.BatchNorm2d(8).train()
    torch._dynamo.reset()
    start = history_mark()
    fn = torch.compile(compiled, backend=fuselint_backend)
    for step in range(3):
        x = (torch.randn(4, 8, 10, 12) * (step + 1) + step).contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(fn(x), eager(x), **tol(torch.float32))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(compiled, name), getattr(eager, name), **tol(torch.float32))
    (report,) = reports_since(start)
    code = report.graph_module.code
    assert "copy_.default" not in code
    assert sum(k.writes_inputs for k in report.kernels) == 2  # the statistics; the counter
    assert why_not_recordable(report.graph_module, [x]).endswith("stores into its input)")


def test_copy_into_an_input_that_another_value_reads_keeps_the_read_before_the_write():
    # y reads buf's old values; the new ones are stored after: fused or not, y must not see them
    def fn(buf, x):
        y = buf * 2 + x
        buf.copy_(x + 1)
        return y

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=fuselint_backend)
    x = torch.randn(6, 5)
    buf, ref = torch.randn(6, 5), None
    ref_buf = buf.clone()
    ref = fn(ref_buf, x)
    torch.testing.assert_close(compiled(buf, x), ref)
    torch.testing.assert_close(buf, ref_buf)


def test_layer_norm_weight_and_bias_grads_sum_over_all_tokens():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 300, 48), torch.randn(48), torch.randn(48)

    def ln(x, w, b):
        return F.layer_norm(x, (48,), w, b)

    got, want, kernels = run(ln, x, w, b, train=True)
    assert split_kernels(kernels)
    for g, w_ in zip(got, want, strict=True):
        torch.testing.assert_close(g, w_, **tol(torch.float32))


def test_chained_reductions_other_than_variance_stay_one_kernel():
    # softmax's sum reads amax's result at every element: chunks cannot be combined
    x = torch.randn(37, 1000)
    got, want, kernels = run(lambda t: torch.softmax(t, -1), x)
    assert kernels and not split_kernels(kernels)
    torch.testing.assert_close(got[0], want[0], **tol(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_outputs_that_need_the_reduction_are_stored_by_a_third_kernel(dtype):
    # normalisation in the reduction's group: centred values, then a per-column std and
    # the standardised values, as BatchNorm's forward with its statistics over N, H, W
    x = (torch.randn(1000, 37) * 2 + 3).to(dtype)
    got, want, kernels = run(lambda t: (t - t.mean(0), (t - t.mean(0)) / t.std(0), t.amax(0)), x)
    (kernel,) = split_kernels(kernels)
    assert len(kernel.more) == 2  # combine, then the full-size stores
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **tol(dtype))


def test_batch_norm_training_with_normalisation_in_the_statistics_kernel():
    # N*H*W <= 8192: the planner fuses the normalisation with the statistics
    torch.manual_seed(0)
    x = torch.randn(4, 8, 10, 11).contiguous(memory_format=torch.channels_last)
    w, b = torch.rand(8) + 0.5, torch.randn(8)
    got, want, kernels = run(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b, train=True
    )
    assert any(len(k.more) == 2 for k in split_kernels(kernels))
    for g, w_ in zip(got, want, strict=True):
        torch.testing.assert_close(g, w_, **tol(torch.float32))


def test_generated_call_function_launches_both_kernels_of_a_split():
    torch._dynamo.reset()
    mark = history_mark()
    torch.manual_seed(0)
    x = torch.randn(1000, 37)
    fn = torch.compile(lambda t: (t * 2).sum(0) + 1, backend=fuselint_backend)
    fn(x)
    (report,) = reports_since(mark)
    (kernel,) = report.kernels
    assert kernel.cfg.combine is not None
    kernel._fast, kernel._fast_more = StandIn(kernel, 0), (StandIn(kernel, 1),)
    report.runner._generate()
    assert report.runner.call is not None, report.runner.why_not
    assert report.runner.source.count("None, None, None,") == 2  # chunks, then combine
    # a sum of 1000 terms of size ~2 summed in another order: absolute error ~1e-5 near 0
    torch.testing.assert_close(fn(x), (x * 2).sum(0) + 1, rtol=1e-5, atol=1e-4)
    assert kernel._fast.launches == 1 and kernel._fast_more[0].launches == 1


class StandIn:
    """FastLaunch's fields for launch `step` of a split kernel, launching the same kernel
    through Triton's JIT path (CPU kernels have no fast launcher)."""

    def __init__(self, kernel, step: int) -> None:
        cfg = kernel.cfg if step == 0 else kernel.cfg.combine
        self.kernel, self.step = kernel, step
        self.grid = (cfg.grid, kernel.cfg.split if step == 0 else 1, 1)
        self.function, self.packed = object(), object()
        self.consts = (cfg.xblock, cfg.rblock)
        self.device_index, self.stream_of, self.alloc = 0, (lambda index: 0), None
        self.aligned = tuple(False for _ in kernel.in_strides)
        self.launches = 0

    def matches(self, args, strides) -> bool:
        return False

    def run(self, g0, g1, g2, stream, function, packed, h1, h2, h3, *rest):
        assert (g0, g1, g2) == self.grid and function is self.function and packed is self.packed
        assert tuple(rest[-2:]) == self.consts
        n_in, n_out = len(self.kernel.in_strides), len(self.kernel.out_specs)
        args, outs = rest[:n_in], rest[n_in : n_in + n_out + 1]  # outputs, then the workspace
        assert outs[-1].numel() == self.kernel.workspace and outs[-1].dtype == torch.float32
        self.launches += 1
        fn, grid, consts, warps = (self.kernel.fn, self.kernel.grid, self.kernel.consts, 4)
        if self.step:
            fn, grid, consts, warps = self.kernel.more[self.step - 1]
        fn[grid](*args, *outs, num_warps=warps, **consts)


def gpu_config(fn, *shapes, dtype=torch.bfloat16):
    args = [torch.empty(s, dtype=dtype, device="meta") for s in shapes]
    gm = aten_graph(fn, *args)
    group = prepare_group(gm, tuple(n.name for n in gm.graph.nodes if n.op == "call_function"))
    return choose_config(lower_group(group.nodes, group.inputs, group.outputs), interpret=False)


def test_gpu_splits_channels_last_batch_norm_statistics_to_fill_the_gpu(monkeypatch):
    monkeypatch.delenv("FUSELINT_SPLIT_MIN_NUMEL")
    # ResNet-50's first BatchNorm in training: 64 channels over 32 x 112 x 112
    cfg = gpu_config(lambda x: torch.var_mean(x.permute(0, 3, 1, 2), [0, 2, 3]), (32, 112, 112, 64))
    assert cfg.grid == 1 and cfg.combine is not None
    assert cfg.grid * cfg.split >= SPLIT_TARGET_PROGRAMS // 2 and cfg.chunk % cfg.rblock == 0
    # its chunks loop over 64 channels x 16 positions with 4 warps (not the unsplit 64 x 64)
    assert (cfg.xblock, cfg.rblock, cfg.num_warps) == (64, SPLIT_OUTER_RBLOCK, 4)
    # GPT-2's bias gradient: 768 columns summed over 4096 tokens
    cfg = gpu_config(lambda g: g.sum(0), (4096, 768))
    assert cfg.combine is not None and cfg.grid * cfg.split >= SPLIT_MAX_PROGRAMS
    # ResNet-50's last stage: 512 channels over 32 x 7 x 7 (800K elements) ran on 8 programs
    cfg = gpu_config(lambda x: torch.var_mean(x.permute(0, 3, 1, 2), [0, 2, 3]), (32, 7, 7, 512))
    assert cfg.combine is not None and cfg.grid * cfg.split >= SPLIT_MAX_PROGRAMS
    # enough rows already, or too little work: one kernel
    assert gpu_config(lambda g: g.sum(-1), (4096, 768)).combine is None
    assert gpu_config(lambda g: g.sum(0), (256, 64)).combine is None
    # an inner reduction that small keeps one kernel (8 rows of 100K: unmeasured, unchanged)
    assert gpu_config(lambda g: g.sum(-1), (8, 100352)).combine is None
    monkeypatch.setenv("FUSELINT_SPLIT", "0")
    assert gpu_config(lambda g: g.sum(0), (4096, 768)).combine is None


def test_gpu_narrows_column_tiles_before_splitting_a_mean_over_many_channels(monkeypatch):
    monkeypatch.delenv("FUSELINT_SPLIT_MIN_NUMEL")
    # EfficientNet-B0's squeeze-excite mean: 64 x 144 channels_last maps of 56 x 56 (9216 columns):
    # 288 programs of 32 columns, one launch, as Inductor runs it
    cfg = gpu_config(lambda x: x.permute(0, 3, 1, 2).mean((2, 3)), (64, 56, 56, 144))
    assert cfg.combine is None and cfg.xblock == 32 and cfg.grid >= SPLIT_MAX_PROGRAMS
    # 64 channels are too few even at 32 a program: split
    cfg = gpu_config(lambda x: x.permute(0, 3, 1, 2).mean((0, 2, 3)), (32, 112, 112, 64))
    assert cfg.combine is not None


def test_gpu_split_of_a_persistent_row_loops_with_the_warps_of_its_block(monkeypatch):
    monkeypatch.delenv("FUSELINT_SPLIT_MIN_NUMEL")
    # 128 rows of 16384: persistent with 16 warps unsplit; split, 4096-blocks with 8
    cfg = gpu_config(lambda x: x.sum(-1), (128, 16384), dtype=torch.float32)
    assert cfg.combine is not None and (cfg.rblock, cfg.num_warps) == (4096, 8)


def test_per_channel_values_from_per_channel_inputs_join_a_reduction_over_n_h_w():
    # v * v has shape (C,) and no operand or reader that places it on the (N, C, H, W) space:
    # it lies on the reduction's rows (BatchNorm's backward squares its saved inverse std)
    x, v = torch.randn(2, 8, 5, 6), torch.rand(8) + 0.5
    got, want, kernels = run(lambda x, v: x.sum((0, 2, 3)) * (v * v), x, v)
    assert len(kernels) == 1
    torch.testing.assert_close(got[0], want[0], **tol(torch.float32))


def test_batch_norm_backward_recomputes_centred_inputs_instead_of_writing_them(monkeypatch):
    # N*H*W > 8192: the statistics and the input gradient are two groups, and the gradient's
    # group recomputes x - mean (and the ReLU mask's select) from the saved inputs; no kernel
    # may also write those full-size values out
    monkeypatch.setenv("FUSELINT_SPLIT_MIN_NUMEL", "1024")
    torch.manual_seed(0)
    shape = (2, 8, 68, 68)
    x, r = (torch.randn(shape).contiguous(memory_format=torch.channels_last) for _ in range(2))
    w, b = torch.rand(8) + 0.5, torch.randn(8)

    def block(x, r, w, b):
        return torch.relu(F.batch_norm(x, None, None, w, b, training=True) + r)

    got, want, kernels = run(block, x, r, w, b, train=True)
    full = [o for k in kernels for o in k.ir.output_meta if tuple(o.shape) == shape]
    # forward: the output and its ReLU mask; backward: r's gradient (the mask's select) and x's
    assert len(full) == 4, [k.__name__ for k in kernels]
    assert all(k.broken is None and k.fallback_calls == 0 for k in kernels)
    for g, w_ in zip(got, want, strict=True):
        torch.testing.assert_close(g, w_, **tol(torch.float32))


@pytest.mark.parametrize("split", ["0", "1"])
def test_looped_variance_reads_its_input_once_and_keeps_fp32_precision(monkeypatch, split):
    # rows longer than the register cap loop over 64-element blocks: each lane keeps Welford's
    # running mean and squares (mean 1e4, spread 1: a plain sum of squares loses every digit),
    # one loop over memory instead of a mean pass and a squares pass
    monkeypatch.setenv("FUSELINT_MAX_PERSISTENT_RBLOCK", "64")
    monkeypatch.setenv("FUSELINT_SPLIT", split)
    torch.manual_seed(2)
    x = torch.randn(8, 3001, dtype=torch.float64) + 1e4
    got, _, kernels = run(lambda t: torch.var_mean(t, 1), x.float())
    (kernel,) = kernels
    assert not kernel.cfg.persistent and (kernel.cfg.combine is not None) == (split == "1")
    assert kernel.source.count("for r0 in range(") == 1 and "pass 1 of 1" in kernel.source
    var, mean = got
    exact = x.float().double()  # what the kernel reads, in fp64
    # (the two passes it replaces, a plain sum for the mean first, were 3.3e-5 off here)
    torch.testing.assert_close(var.double(), exact.var(1), rtol=2e-5, atol=0)
    torch.testing.assert_close(mean.double(), exact.mean(1), rtol=1e-7, atol=0)


@pytest.mark.parametrize("name", ["reciprocal", "log"])
def test_looped_variance_of_a_short_last_chunk_ignores_its_empty_lanes(name):
    # 1000 = 3 chunks of 256 and one of 232: lanes 232..255 of the last chunk see no element,
    # and their masked loads (0) give 1/0 = inf and log(0) = -inf; weighted by 0 they must not
    # turn the row's sums into nan
    torch.manual_seed(0)
    x = torch.rand(3, 1000) + 0.5
    got, want, kernels = run(lambda x: torch.var_mean(getattr(x, name)(), 1), x)
    assert split_kernels(kernels) and "pass 1 of 1" in kernels[0].source
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


def test_copy_into_an_input_that_its_own_value_gathers_from_stays_in_aten():
    # buf += buf[perm]: a program that stores buf[i] may do so before another program reads
    # buf[i] for its gather (200000 elements: 4 programs of 65536 under the interpreter, which
    # runs them in order, so the later ones read what the first one stored)
    def fn(buf, perm):
        buf.add_(torch.gather(buf, 0, perm))
        return perm * 2

    torch._dynamo.reset()
    start = history_mark()
    n = 200_000
    buf, perm = torch.randn(n), torch.arange(n - 1, -1, -1)
    ref_buf = buf.clone()
    fn(ref_buf, perm)
    torch.compile(fn, backend=fuselint_backend)(buf, perm)
    torch.testing.assert_close(buf, ref_buf)
    (report,) = reports_since(start)
    assert not any(k.writes_inputs for k in report.kernels)


def test_an_input_stored_by_a_split_kernel_is_updated_once_when_a_later_launch_fails(monkeypatch):
    # buf += x is stored by the first launch (the chunks'); when the combine kernel then fails
    # to compile (simulated: Triton compiles each launch when it first runs it), the group's
    # ATen fallback must start from buf's old values, not add x a second time
    from fuselint.backend.runtime import FusedKernel

    def first_launch_then_fail(self, args, outs):
        fn, grid, consts, warps = self.launches()[0]
        fn[grid](*args, *outs, num_warps=warps, **consts)
        raise RuntimeError("the combine kernel does not compile")

    monkeypatch.setattr(FusedKernel, "_launch_jit", first_launch_then_fail)

    def fn(buf, x):
        buf.add_(x)
        return x.sum(1)

    torch._dynamo.reset()
    start = history_mark()
    buf, x = torch.randn(8, 1000), torch.randn(8, 1000)
    ref_buf = buf.clone()
    want = fn(ref_buf, x)
    with pytest.warns(UserWarning, match="does not compile"):
        got = torch.compile(fn, backend=fuselint_backend)(buf, x)
    (kernel,) = reports_since(start)[0].kernels
    assert kernel.writes_inputs and kernel.cfg.combine is not None and kernel.fallback_calls == 1
    torch.testing.assert_close(got, want, **tol(torch.float32))
    torch.testing.assert_close(buf, ref_buf)


def test_gpu_split_variance_of_a_last_chunk_shorter_than_its_tile(monkeypatch):
    # the GPU's split of channels_last statistics: 2*37*29 = 2146 elements per channel in chunks
    # of 32 (tiles 16 deep), the last chunk 2 long; 14 lanes of it see nothing (run under the
    # interpreter with the GPU's launch configuration)
    from fuselint.backend import compiler

    monkeypatch.setattr(
        compiler, "choose_config", lambda ir, interpret, cap=None: choose_config(ir, False, cap)
    )
    x = (torch.rand(2, 8, 37, 29) + 0.5).contiguous(memory_format=torch.channels_last)
    got, want, kernels = run(lambda x: torch.var_mean(x.reciprocal(), (0, 2, 3)), x)
    (kernel,) = split_kernels(kernels)
    assert (kernel.cfg.rblock, kernel.cfg.chunk) == (SPLIT_OUTER_RBLOCK, 32)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


def test_a_value_that_every_reading_group_leaves_to_aten_is_written_out_once():
    # fmod (no lowering) and what it reads are computed in the three reductions' groups; each
    # group leaves fmod to ATen, so relu(x * y + 1) must come from a kernel, not from ATen ops
    def fn(x, y):
        d = torch.fmod(torch.relu(x * y + 1), 0.7)
        return d.sum(0), d.sum(1), d.amax(0)

    torch.manual_seed(0)
    start = history_mark()
    got, want, kernels = run(fn, torch.randn(64, 300), torch.randn(64, 300))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-5)
    (report,) = reports_since(start)
    aten = [n.target for n in report.graph_module.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
    assert aten == [torch.ops.aten.fmod.Scalar], aten


@pytest.mark.parametrize("config", ["interpreter", "gpu"])
@pytest.mark.parametrize("split", ["0", "1"])
@pytest.mark.parametrize("shape, dim", [((64, 24), 0), ((2048, 8), 0), ((6, 40), 1), ((3, 9000), 1)])
def test_max_and_min_keep_a_nan_as_eager_does(monkeypatch, config, split, shape, dim):
    # torch.amax/amin/max return NaN for a row with a NaN in it; tl.max, tl.maximum and
    # tl.minimum drop it (PropagateNan.NONE). Persistent and looped rows, split and whole.
    from fuselint.backend import compiler

    if split == "0":
        monkeypatch.setenv("FUSELINT_SPLIT", "0")
    if config == "gpu":
        monkeypatch.setattr(
            compiler, "choose_config", lambda ir, interpret, cap=None: choose_config(ir, False, cap)
        )
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    x[1, 2] = x[-1, -1] = float("nan")  # one NaN near the start, one in the last chunk
    got, want, kernels = run(lambda x: ((x * 2).amax(dim), (x * 2).amin(dim), (x + 1).max()), x)
    assert kernels and all(k.fallback_calls == 0 for k in kernels)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.isnan(), w.isnan()), (g, w)
        torch.testing.assert_close(g, w, equal_nan=True)
