"""torch.compile(backend=fuselint_backend) against eager on the pattern suite, inference and training."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import flat, needs_interpreter

import fuselint.backend as backend
from fuselint.backend import fuselint_backend, history, history_mark, reports_since

pytestmark = needs_interpreter


def compile_and_compare(fn, *args, atol=1e-5, rtol=1e-5, kernels=None):
    torch._dynamo.reset()
    start = history_mark()
    got = flat(torch.compile(fn, backend=fuselint_backend)(*args))
    want = flat(fn(*args))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol)
    reports = reports_since(start)
    launched = [k for r in reports for k in r.kernels if k.calls]
    if kernels is not None:
        assert len(launched) == kernels, [(k.__name__, k.calls) for r in reports for k in r.kernels]
    return reports


def cos_sin(x):
    return torch.sin(torch.cos(x))


def bias_gelu_residual(x, b, r):
    return F.gelu(x + b) + r


def manual_softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def torch_softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def silu_mul(a, b):
    return F.silu(a) * b


def residual_layer_norm(x, r, w, b):
    h = x + r
    return h, F.layer_norm(h, (x.shape[-1],), w, b)


@pytest.fixture
def data():
    torch.manual_seed(0)
    n, d = 16, 128
    return {
        "x": torch.randn(n, d),
        "r": torch.randn(n, d),
        "w": torch.randn(d),
        "b": torch.randn(d),
    }


def test_cos_sin_is_one_kernel(data):
    compile_and_compare(cos_sin, data["x"], kernels=1)


def test_bias_gelu_residual_is_one_kernel(data):
    compile_and_compare(bias_gelu_residual, data["x"], data["b"], data["r"], kernels=1)


@pytest.mark.parametrize("fn", [manual_softmax, torch_softmax])
def test_softmax_is_one_kernel(fn, data):
    compile_and_compare(fn, data["x"], kernels=1)


def test_layer_norm_is_one_kernel(data):
    compile_and_compare(layer_norm, data["x"], data["w"], data["b"], atol=1e-4, rtol=1e-4, kernels=1)


def test_rms_norm_is_one_kernel(data):
    compile_and_compare(rms_norm, data["x"], data["w"], atol=1e-5, rtol=1e-5, kernels=1)


def test_silu_mul_is_one_kernel(data):
    compile_and_compare(silu_mul, data["x"], data["r"], kernels=1)


def test_residual_layer_norm_returns_both_from_one_kernel(data):
    compile_and_compare(
        residual_layer_norm, data["x"], data["r"], data["w"], data["b"], atol=1e-4, rtol=1e-4, kernels=1
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_and_layer_norm_in_half_types(dtype, data):
    x, w, b = (data[k].to(dtype) for k in "xwb")
    compile_and_compare(torch_softmax, x, atol=2e-2, rtol=2e-2, kernels=1)
    compile_and_compare(layer_norm, x, w, b, atol=3e-2, rtol=3e-2, kernels=1)


def test_reduction_over_dim_zero(data):
    compile_and_compare(lambda x: torch.exp(x).sum(0) * 2, data["x"], atol=1e-4, rtol=1e-5, kernels=1)


def test_transposed_input(data):
    xt = data["x"].t()
    compile_and_compare(lambda x: torch.sigmoid(x) * x + 1, xt, kernels=1)


def test_broadcasting_three_ways():
    a, b, c = torch.randn(4, 1, 32), torch.randn(5, 1), torch.randn(32)
    compile_and_compare(lambda a, b, c: torch.tanh(a * b + c), a, b, c, kernels=1)


def test_matmul_runs_through_aten_around_kernels(data):
    w = torch.randn(128, 64)
    compile_and_compare(lambda x, w: torch.relu(x @ w + 1) * 2, data["x"], w, atol=1e-4, rtol=1e-4, kernels=1)


def test_training_step_matches_eager_grads():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(), torch.nn.Linear(64, 16)
    )
    ref = torch.nn.Sequential(*[m for m in model])  # the same parameters
    x = torch.randn(8, 32)
    target = torch.randn(8, 16)

    def step(m, x):
        out = torch.softmax(m(x), -1)
        return F.mse_loss(out, target)

    loss_ref = step(ref, x)
    loss_ref.backward()
    grads_ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch._dynamo.reset()
    start = history_mark()
    loss = torch.compile(step, backend=fuselint_backend)(model, x)
    loss.backward()
    torch.testing.assert_close(loss, loss_ref, atol=1e-5, rtol=1e-5)
    for p, g in zip(model.parameters(), grads_ref):
        torch.testing.assert_close(p.grad, g, atol=1e-4, rtol=1e-4)
    names = {r.graph for r in reports_since(start)}
    assert {"forward", "backward"} <= names
    assert all(r.kernels for r in reports_since(start))
    assert all(k.calls for r in reports_since(start) for k in r.kernels)


def test_group_with_unsupported_op_falls_back_to_aten(data):
    def fn(x):
        y = torch.exp(x) * 2
        return torch.atan(y) + y  # atan is pointwise but not in the op table

    reports = compile_and_compare(fn, data["x"], atol=1e-5, rtol=1e-5)
    assert any("atan" in reason for r in reports for _, reason in r.fallbacks)
    assert any(k.calls for r in reports for k in r.kernels)


def test_hand_made_group_splits_around_an_unsupported_node(data):
    """A planner group (per the FusionGroup contract) holding cumsum still computes right."""
    from backend_helpers import aten_graph

    from fuselint.backend.compiler import CompileReport, _compile_groups, rebuild

    def fn(x):
        y = torch.exp(x) * 2
        return torch.cumsum(y, -1) * y + 1

    x = data["x"]
    gm = aten_graph(fn, x)
    group = tuple(n.name for n in gm.graph.nodes if n.op == "call_function")
    report = CompileReport("hand")
    compiled = _compile_groups(gm, [group], report)
    assert [names for names, _ in report.fallbacks] == [("cumsum",)]
    assert len(compiled) == 2  # exp*2 before, *y+1 after
    out = rebuild(gm, compiled)(x)
    torch.testing.assert_close(flat(out)[0], fn(x), atol=1e-4, rtol=1e-4)
    assert all(cg.kernel.calls == 1 for cg in compiled)


def test_kernel_falls_back_when_strides_differ_at_run_time(data):
    from backend_helpers import aten_graph

    from fuselint.backend.compiler import compile_graph

    x = data["x"]
    gm = compile_graph(aten_graph(lambda x: x * 2 + 1, x), [x])
    kernel = history[-1].kernels[0]
    xt = x.t().contiguous().t()  # same shape, column-major
    torch.testing.assert_close(flat(gm(xt))[0], xt * 2 + 1)
    assert kernel.fallback_calls == 1


def test_cpu_without_interpreter_runs_everything_through_aten(monkeypatch, data):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    reports = compile_and_compare(cos_sin, data["x"], kernels=0)
    assert all(not r.kernels for r in reports)


def test_registered_under_its_name(data):
    assert "fuselint" in torch._dynamo.list_backends(exclude_tags=())
    torch._dynamo.reset()
    out = torch.compile(cos_sin, backend="fuselint")(data["x"])
    torch.testing.assert_close(out, cos_sin(data["x"]))
    assert backend.history[-1].kernels


def test_symbolic_shapes_run_through_aten(data):
    torch._dynamo.reset()
    start = history_mark()
    fn = torch.compile(cos_sin, backend=fuselint_backend, dynamic=True)
    for rows in (8, 12):
        x = torch.randn(rows, 32)
        torch.testing.assert_close(fn(x), cos_sin(x))
    assert reports_since(start) and all(not r.kernels for r in reports_since(start))


def test_conv_relu_maxpool_fuses_relu_into_the_pooling_window():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 3, padding=1, bias=False), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
    ).eval()
    x = torch.randn(2, 4, 8, 8)
    with torch.no_grad():
        # a channels_last copy of the input (the weight's is made once and kept, kept_layouts.py),
        # then ReLU inside the window kernel
        reports = compile_and_compare(model, x, atol=1e-5, rtol=1e-5, kernels=2)
    assert reports[-1].kept == 1
    code = reports[-1].graph_module.code
    assert "aten.max_pool2d_with_indices" not in code and "_low_memory_max_pool" not in code
    assert reports[-1].kernels[-1].__name__.startswith("fuselint_relu_max_pool2d_with_indices")


def test_conv_runs_channels_last_with_its_bias_peeled_and_returns_eager_strides():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
    ).eval()
    x = torch.randn(2, 4, 8, 8)
    with torch.no_grad():
        reports = compile_and_compare(model, x, atol=1e-5, rtol=1e-5, kernels=3)  # the weight's copy kept
        out = torch.compile(model, backend=fuselint_backend)(x)
    assert out.stride() == model(x).stride()
    gm = reports[-1].graph_module
    (conv,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert conv.args[2] is None  # the bias is added by the kernel after the conv
    assert all(a.meta["val"].is_contiguous(memory_format=torch.channels_last) for a in conv.args[:2])
    names = [k.__name__ for k in reports[-1].kernels]
    assert names[1] == "fuselint_add_relu", names


def test_batchnorm_scale_is_computed_inside_its_epilogue_kernel_as_inductor_does():
    # Without a conv bias the per-channel scale rsqrt(var + eps), shape (C,), reaches the
    # (N, C, H, W) math only through unsqueezes: lowering places it on dim 1 from its readers.
    # Eager BatchNorm's running statistics are made non-trivial so a misplaced dim would show.
    model = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
    ).eval()
    bn = model[1]
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-1, 1)
    x = torch.randn(2, 4, 6, 5)
    with torch.no_grad():
        # a channels_last copy of the input (the weight's is kept), then one kernel for BatchNorm and ReLU
        reports = compile_and_compare(model, x, atol=1e-5, rtol=1e-5, kernels=2)
    assert not reports[-1].fallbacks


def test_token_embedding_is_read_inside_the_layer_norm_kernel():
    # GPT-2's first kernel: token rows gathered, position rows added, LayerNorm, as in Inductor
    torch.manual_seed(0)
    wte, wpe = torch.randn(100, 32), torch.randn(16, 32)
    g, b = torch.randn(32), torch.randn(32)

    def embed(ids):
        h = F.embedding(ids, wte) + F.embedding(torch.arange(ids.shape[1]), wpe)
        return F.layer_norm(h, (32,), g, b), h

    ids = torch.randint(0, 100, (2, 16))
    ids[0, 0] = 99  # the last row of the table
    reports = compile_and_compare(embed, ids)
    names = [k.__name__ for r in reports for k in r.kernels]
    # one kernel: both lookups (the positions' iota too), the add and the LayerNorm
    assert len(names) == 1 and names[0].startswith("fuselint_embedding_iota_add_var_mean"), names
    assert not any(r.fallbacks for r in reports)


def test_embedding_sum_is_recomputed_after_a_matmul_not_read_back_rounded():
    # GPT-2's residual after attention: Inductor recomputes wte(ids) + wpe(pos) in fp32 inside
    # the add, rather than reading back the sum stored in bf16 (one rounding less)
    torch.manual_seed(0)
    wte, wpe = torch.randn(100, 32).bfloat16(), torch.randn(16, 32).bfloat16()
    w = torch.randn(32, 32).bfloat16()

    def block(ids):
        h = F.embedding(ids, wte) + F.embedding(torch.arange(ids.shape[1]), wpe)
        return h + F.layer_norm(h, (32,)) @ w

    ids = torch.randint(0, 100, (2, 16))
    reports = compile_and_compare(block, ids, atol=0.1, rtol=0.05)
    kernels = [k for r in reports for k in r.kernels]
    assert len(kernels) == 2, [k.__name__ for k in kernels]
    first, residual = kernels
    assert len(first.out_specs) == 1  # the LayerNorm's output only: the sum is not written
    assert "embedding" in residual.__name__  # reads the tables, not a stored sum


def test_bert_embeddings_are_one_kernel_with_looked_up_token_types_and_shared_positions():
    # BERT's embeddings, as Inductor runs them: token types gathered from a buffer by position,
    # then looked up; position rows shared by the batch; the sum normalised, all in one kernel
    torch.manual_seed(0)
    words, types, positions = torch.randn(100, 32), torch.randn(2, 32), torch.randn(16, 32)
    buffered = torch.randint(0, 2, (1, 16))
    position_ids = torch.arange(16).unsqueeze(0)  # buffers, as the model registers them
    g, b = torch.randn(32), torch.randn(32)

    def embed(ids):
        n = ids.shape[1]
        pos = position_ids[:, :n]
        token_types = torch.gather(buffered.expand(1, -1), 1, pos).expand(ids.shape[0], n)
        h = F.embedding(ids, words) + F.embedding(token_types, types) + F.embedding(pos, positions)
        return F.layer_norm(h, (32,), g, b)

    (report,) = compile_and_compare(embed, torch.randint(0, 100, (3, 16)))
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]


def relative_position_bias(table, mask):
    # T5's position bias: buckets computed from positions alone, looked up, permuted to
    # (1, heads, q, k) and masked with a 0-d fill per layer
    q = torch.arange(8)
    rel = q[None, :] - q[:, None]
    small = rel.abs() < 4
    big = 4 + (torch.log(rel.abs().float().clamp(min=1) / 4) / math.log(2) * 2).to(torch.int64)
    buckets = torch.where(small, rel.abs(), big.clamp(max=7)) + (rel > 0).to(torch.int64) * 8
    bias = F.embedding(buckets, table).permute(2, 0, 1).unsqueeze(0)
    fill = torch.scalar_tensor(-1e4)
    return [torch.where(mask, bias, fill).contiguous() for _ in range(2)]


def test_lookup_indices_computed_in_the_kernel_and_a_zero_d_fill_join_their_readers():
    table, mask = torch.randn(16, 4), torch.rand(2, 1, 1, 8) > 0.3
    (report,) = compile_and_compare(relative_position_bias, table, mask)
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]


def pooled_channels_layer_norm(x, weight, bias):
    # ConvNeXt's head: the global mean, restrided as channels_last (only size-1 dims move), then
    # LayerNorm over channels in fp32
    m = x.mean((2, 3), keepdim=True)
    c = m.shape[1]
    m = torch.as_strided(m, m.shape, (c, 1, c, c)).permute(0, 2, 3, 1).float()
    return F.layer_norm(m, (c,), weight, bias, 1e-6).to(x.dtype).permute(0, 3, 1, 2)


def test_an_as_strided_that_keeps_every_element_is_followed_inside_the_kernel():
    from backend_helpers import aten_graph

    from fuselint.backend.compiler import compile_graph

    torch.manual_seed(0)
    x = torch.randn(2, 16, 4, 4, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    args = x, torch.randn(16), torch.randn(16)
    gm = aten_graph(pooled_channels_layer_norm, *args)
    assert "aten.as_strided" in gm.code  # as the real ConvNeXt graph has it
    start = history_mark()
    (got,) = flat(compile_graph(gm, list(args))(*args))
    torch.testing.assert_close(got, pooled_channels_layer_norm(*args), atol=2e-2, rtol=2e-2)
    (report,) = reports_since(start)
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 2, [k.__name__ for k in report.kernels]  # the mean, the norm
    code = report.graph_module.code
    assert "aten.as_strided" not in code and "prims.convert_element_type" not in code, code
    # lowered whole, the restrided mean and its conversion in one kernel, as the planner groups
    # them in ConvNeXt (whose group a failed as_strided used to split, leaving a convert kernel)
    from fuselint.backend.compiler import prepare_group
    from fuselint.backend.lowering import lower_group

    names = ("mean", "as_strided", "permute", "convert_element_type")
    group = prepare_group(gm, names)
    ir = lower_group(group.nodes, group.inputs, group.outputs)
    assert len(ir.outputs) == 1


def test_a_kernel_that_cannot_be_built_leaves_its_group_to_aten(monkeypatch, data):
    import fuselint.backend.compiler as compiler

    def no_triton(*args, **kwargs):
        raise ImportError("No module named 'triton'")

    monkeypatch.setattr(compiler, "build_kernel", no_triton)
    reports = compile_and_compare(bias_gelu_residual, data["x"], data["b"], data["r"], kernels=0)
    assert any("ImportError" in why for r in reports for _, why in r.fallbacks)


def mask_rows(scores, mask):
    # a padding mask's any/all over the keys (BERT's mask checks, _safe_softmax's fully masked rows)
    keep = mask.any(dim=-1, keepdim=True)
    full = (scores > 0).all(dim=-1, keepdim=True)
    return torch.where(keep & ~full, scores * 2, scores - 1)


def test_any_and_all_reduce_inside_a_kernel():
    torch.manual_seed(0)
    scores = torch.randn(4, 6, 16)
    scores[1, 2] = scores[1, 2].abs() + 0.5  # a row where all() is true
    mask = torch.rand(4, 6, 16) > 0.7
    mask[0, 3] = False  # a row where any() is false
    (report,) = compile_and_compare(mask_rows, scores, mask)
    names = " ".join(k.__name__ for k in report.kernels)
    assert not report.fallbacks, report.fallbacks
    assert "any" in names, names  # all() reaches the backend as not(any(not x))
    assert len(report.kernels) == 1, names


def gathered(table, ids, scale):
    # BERT's token types: a buffer's entries picked by positions, then arithmetic on them
    picked = torch.gather(table, 1, ids)
    return picked.float() * scale + 1


@pytest.mark.parametrize("transposed", [False, True])
def test_gather_reads_its_rows_inside_the_kernel_that_uses_them(transposed):
    torch.manual_seed(0)
    table = torch.randn(4, 32)
    if transposed:
        table = torch.randn(32, 4).t()  # strides (1, 4): the gathered dim is not contiguous
    ids = torch.randint(0, 32, (4, 16))
    (report,) = compile_and_compare(gathered, table, ids, torch.randn(16))
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1 and "gather" in report.kernels[0].__name__


def rotary(q, cos, sin):
    # LLaMA's apply_rotary_pos_emb: rotate_half concatenates a computed half (-x2) with x1
    half = q.shape[-1] // 2
    x1, x2 = q[..., :half], q[..., half:]
    return q * cos + torch.cat((-x2, x1), dim=-1) * sin


def test_rotate_half_with_a_computed_cat_piece_is_one_kernel():
    torch.manual_seed(0)
    q = torch.randn(2, 8, 4, 16).transpose(1, 2)  # heads split from a projection: not contiguous
    cos, sin = torch.randn(8, 16), torch.randn(8, 16)
    (report,) = compile_and_compare(rotary, q, cos, sin)
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]
    assert "neg" in report.kernels[0].__name__ and "cat" in report.kernels[0].__name__


def patch_tokens(x, weight, bias, cls, pos):
    # a ViT's patch embedding: conv (the backend peels its bias), tokens, class token, positions
    t = F.conv2d(x, weight, bias, stride=4).flatten(2).transpose(1, 2)
    return torch.cat((cls.expand(x.shape[0], -1, -1), t), dim=1) + pos


def test_a_patch_embeddings_bias_joins_the_class_token_cat_in_one_kernel():
    # the bias (C,) broadcasts inside the cat's piece; before, an add kernel of its own wrote
    # conv + bias in bf16 and the cat kernel read it back (one more rounding than Inductor)
    # (8 input channels: a 3-channel image's patch convolution runs as a GEMM, test_backend_patchify)
    torch.manual_seed(0)
    x, weight, bias = torch.randn(2, 8, 16, 16), torch.randn(8, 8, 4, 4), torch.randn(8)
    cls, pos = torch.randn(1, 1, 8), torch.randn(1, 17, 8)
    (report,) = compile_and_compare(patch_tokens, x, weight, bias, cls, pos, atol=1e-4, rtol=1e-4)
    assert not report.fallbacks, report.fallbacks
    names = [k.__name__ for k in report.kernels]
    # besides the layout pass's channels_last copies of the image and weight: one kernel
    assert [n for n in names if n != "fuselint_clone"] == ["fuselint_add_cat"], names


def test_a_cat_piece_operand_that_varies_along_the_cat_is_not_broadcast():
    # (1, 4, 1) varies along the cat dim: it must be read shifted, which a broadcast load is not
    def fn(a, b, c):
        return torch.cat((a, b + c), dim=1)

    a, b, c = torch.randn(2, 3, 5), torch.randn(2, 4, 5), torch.randn(1, 4, 1)
    compile_and_compare(fn, a, b, c)


def llama_rotary(q, k, inv_freq):
    # LLaMA's rotary path: cos/sin tables from positions and frequencies, then both rotations
    positions = torch.arange(q.shape[2], dtype=torch.float32)
    freqs = positions[:, None] * inv_freq[None, :]
    table = torch.cat((freqs, freqs), dim=-1)
    cos, sin = table.cos()[None, None], table.sin()[None, None]
    return rotary(q, cos, sin), rotary(k, cos, sin)


def test_a_group_that_splits_keeps_the_rotary_chain_whole_and_the_tables_apart():
    torch.manual_seed(0)
    q = torch.randn(2, 8, 4, 16).transpose(1, 2)
    k = torch.randn(2, 8, 4, 16).transpose(1, 2)
    (report,) = compile_and_compare(llama_rotary, q, k, torch.rand(8))
    assert not report.fallbacks, report.fallbacks
    # the rotations (rotate_half: neg and cat); the tables' own cat((freqs, freqs)) is written
    # back from its expand + clone + view decomposition (fuselint.backend.repeats)
    rotating = [k.__name__ for k in report.kernels if "neg" in k.__name__]
    # q * cos and k * cos run with their rotations: one kernel, no separate mul kernel
    assert len(rotating) == 1, [k.__name__ for k in report.kernels]
    assert not any(k.__name__ in ("fuselint_mul", "fuselint_neg") for k in report.kernels)
    assert not any("neg" in k.__name__ and "cos" in k.__name__ for k in report.kernels)


def channels_layer_norm(y, b, weight, bias):
    # ConvNeXt's block: the depthwise conv's bias add, then LayerNorm over channels through a permute
    y = (y + b.view(1, -1, 1, 1)).permute(0, 2, 3, 1)
    return F.layer_norm(y, (y.shape[-1],), weight, bias, 1e-6)


@pytest.mark.parametrize("shape", [(2, 16, 8, 8), (2, 16, 4, 16), (1, 8, 8, 8)])
def test_a_value_read_through_a_permute_is_computed_in_the_reduction_that_reads_it(shape):
    torch.manual_seed(0)
    c = shape[1]
    args = torch.randn(shape), torch.randn(c), torch.randn(c), torch.randn(c)
    (report,) = compile_and_compare(channels_layer_norm, *args, atol=1e-5, rtol=1e-4)
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]


def scaled_residual_then_channels_layer_norm(h, gamma, shortcut, weight, bias):
    # ConvNeXt's last block of a stage, then the downsample's LayerNorm2d: the MLP output (NHWC)
    # scaled, permuted to NCHW and added to the shortcut, then permuted back and normalised over
    # channels; the scale is a prologue of the add, which is a prologue of the LayerNorm
    y = (h * gamma).permute(0, 3, 1, 2) + shortcut
    return F.layer_norm(y.permute(0, 2, 3, 1), (y.shape[1],), weight, bias, 1e-6).permute(0, 3, 1, 2)


@pytest.mark.parametrize("channels_last", [True, False])
def test_a_prologue_of_a_prologue_runs_in_the_reduction_that_reads_it(channels_last):
    torch.manual_seed(0)
    n, c, hw = 2, 16, 4
    shortcut = torch.randn(n, c, hw, hw)
    if channels_last:
        shortcut = shortcut.to(memory_format=torch.channels_last)
    args = torch.randn(n, hw, hw, c), torch.randn(c), shortcut, torch.randn(c), torch.randn(c)
    (report,) = compile_and_compare(scaled_residual_then_channels_layer_norm, *args, atol=1e-5, rtol=1e-4)
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]


def position_bias_per_layer(table, buckets, mask):
    # T5's relative position bias: one lookup, permuted into (1, heads, q, k) and copied into each
    # layer's attention mask
    bias = F.embedding(buckets, table).permute(2, 0, 1).unsqueeze(0)
    return [(bias + mask).contiguous() for _ in range(3)]


def test_a_lookup_read_through_a_permute_by_siblings_runs_in_their_kernel():
    torch.manual_seed(0)
    table, buckets, mask = torch.randn(32, 4), torch.randint(0, 32, (8, 8)), torch.randn(2, 1, 1, 8)
    (report,) = compile_and_compare(position_bias_per_layer, table, buckets, mask)
    assert not report.fallbacks, report.fallbacks
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]


def test_conv_training_keeps_saved_activations_in_channels_last():
    # The forward runs its convolutions in channels_last (Inductor's layout decision for this
    # graph) and returns the activations it saves for the backward in that layout, telling
    # AOTAutograd their strides; the backward is compiled for them and its convolutions read the
    # gradient in channels_last too, so cuDNN converts nothing. What the user sees keeps its
    # strides, and the gradients equal eager's.
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 96, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(96),
        torch.nn.ReLU(),
        torch.nn.Conv2d(96, 96, 3, padding=1, bias=False),
    )
    ref = copy.deepcopy(model)
    x = torch.randn(2, 8, 12, 12)
    want = ref(x)
    want.sum().backward()
    torch._dynamo.reset()
    start = history_mark()
    got = torch.compile(model, backend=fuselint_backend)(x)
    got.sum().backward()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert got.stride() == want.stride()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4)
    (backward,) = [r for r in reports_since(start) if r.graph == "backward"]
    grads = [
        n
        for n in backward.graph_module.graph.nodes
        if n.target is torch.ops.aten.convolution_backward.default
    ]
    assert len(grads) == 2
    cl = torch.channels_last
    for n in grads:
        g = n.args[0].meta["val"]
        assert g.is_contiguous(memory_format=cl) and not g.is_contiguous()
    assert any(
        not n.args[1].meta["val"].is_contiguous() for n in grads
    )  # a saved activation, in channels_last


def test_batch_norm_running_statistics_update_inside_kernels():
    # A training forward's BatchNorm writes its new running statistics into the module's buffers
    # (`copy_` into graph inputs): the arithmetic that makes them is planned (no longer taken as
    # dead code left to ATen op by op), and the buffers end up as eager's.
    import copy

    from fuselint.backend.runtime import FusedKernel

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU())
    ref = copy.deepcopy(model)
    x = torch.randn(2, 3, 16, 16)
    torch._dynamo.reset()
    start = history_mark()
    compiled = torch.compile(model, backend=fuselint_backend)
    for _ in range(2):
        compiled(x).sum().backward()
        ref(x).sum().backward()
    bn, bn_ref = model[1], ref[1]
    torch.testing.assert_close(bn.running_mean, bn_ref.running_mean, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(bn.running_var, bn_ref.running_var, atol=1e-5, rtol=1e-5)
    assert int(bn.num_batches_tracked) == int(bn_ref.num_batches_tracked) == 2
    (forward,) = [r for r in reports_since(start) if r.graph == "forward"]
    aten = {
        str(n.target)
        for n in forward.graph_module.graph.nodes
        if n.op == "call_function" and not isinstance(n.target, FusedKernel)
    }
    assert not aten & {"aten.mul.Tensor", "aten.add.Tensor"}


def test_a_matmul_runs_just_before_its_first_reader():
    # BERT's value projection: computed up front, its result left L2 before the softmax's
    # readers came to it; each matmul now runs where it is first read, with the same result
    torch.manual_seed(0)
    wq, wk, wv = (torch.randn(32, 32) for _ in range(3))

    def attention(x):
        q, k, v = x @ wq, x @ wk, x @ wv
        return torch.softmax(q @ k.transpose(-1, -2) / 8, -1) @ v

    reports = compile_and_compare(attention, torch.randn(16, 32))
    nodes = [n for n in reports[-1].graph_module.graph.nodes if n.op == "call_function"]
    order = {n: i for i, n in enumerate(nodes)}
    softmax = next(n for n in nodes if n.target in reports[-1].kernels)
    last = next(n for n in nodes if any(u.op == "output" for u in n.users))  # probs @ v
    value = last.args[1]
    assert last.target is value.target is torch.ops.aten.mm.default
    assert order[softmax] < order[value] < order[last]


def test_a_matmul_reading_its_input_through_a_view_also_runs_just_before_its_first_reader():
    # nn.Linear on 3-d tokens: the matmul reads a 2-d view that nothing else reads, so the view
    # is no reason to keep the matmul where it was (BERT's projections, fp32 and bf16)
    torch.manual_seed(0)
    wq, wk, wv = (torch.randn(32, 32) for _ in range(3))

    def attention(x):
        flat = [x.reshape(-1, 32) for _ in range(3)]
        q, k, v = ((f @ w).view(2, 8, 32) for f, w in zip(flat, (wq, wk, wv), strict=True))
        return (torch.softmax(q @ k.transpose(-1, -2) / 8, -1) @ v) + x

    reports = compile_and_compare(attention, torch.randn(2, 8, 32))
    nodes = [n for n in reports[-1].graph_module.graph.nodes if n.op == "call_function"]
    order = {n: i for i, n in enumerate(nodes)}
    mms = [n for n in nodes if n.target is torch.ops.aten.mm.default]
    softmax = next(n for n in nodes if n.target in reports[-1].kernels and "exp" in n.target.__name__)
    assert len(mms) == 3 and order[mms[0]] < order[softmax] < order[mms[2]]
