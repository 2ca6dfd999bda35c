"""On a CUDA device: a compiled call never waits for the GPU, and CUDA-graph replay is right."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from fuselint.backend import history_mark, reports_since
from fuselint.backend.precompile import distinct_launches

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class Block(torch.nn.Module):
    """A GPT-style block with what real models build per call: positions (iota), a mask (full, where)."""

    def __init__(self, vocab: int = 512, dim: int = 256, seq: int = 128) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(seq, dim)
        self.ln = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.mlp = torch.nn.Linear(dim, dim)

    def forward(self, ids):
        n = ids.shape[1]
        h = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))
        q, k, v = self.qkv(self.ln(h)).chunk(3, dim=-1)
        causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
        scores = (q @ k.transpose(-1, -2)) / 16.0
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        h = h + torch.softmax(scores, -1) @ v
        return h + F.gelu(self.mlp(h))


def _model_and_ids(dtype=torch.float32, batch=4, seq=128):
    torch.manual_seed(0)
    model = Block(seq=seq).cuda().to(dtype).eval()
    return model, torch.randint(0, 512, (batch, seq), device="cuda")


@pytest.mark.parametrize("options", [None, {"cudagraphs": True}], ids=["plain", "cudagraphs"])
def test_a_compiled_call_never_synchronises(options):
    model, ids = _model_and_ids()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fuselint", options=options)
    with torch.no_grad():
        want = model(ids)
        for _ in range(3):  # compile, record, first replay
            compiled(ids)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = compiled(ids)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_cudagraphs_replay_matches_eager_on_fresh_inputs_and_new_shapes():
    model, ids = _model_and_ids(torch.bfloat16)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint", options={"cudagraphs": True}, dynamic=False)
    with torch.no_grad():
        outs = []
        for step in range(4):  # a new ids tensor each call: copied into the recording's buffer
            ids = torch.randint(
                0, 512, (4, 128), device="cuda", generator=torch.Generator("cuda").manual_seed(step)
            )
            outs.append((compiled(ids), model(ids)))
        for got, want in outs:  # earlier outputs survive later replays
            torch.testing.assert_close(got, want, atol=3e-2, rtol=3e-2)
        short = ids[:, :64].contiguous()
        for _ in range(3):
            torch.testing.assert_close(compiled(short), model(short), atol=3e-2, rtol=3e-2)
    replays = [r.replay for r in reports_since(mark) if r.replay is not None]
    assert replays and all(r.disabled is None for r in replays), [r.disabled for r in replays]
    assert sum(r.replays for r in replays) >= 4 and sum(r.recordings for r in replays) >= 2


class ThreeProjections(torch.nn.Module):
    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self.q = torch.nn.Linear(dim, dim)
        self.k = torch.nn.Linear(dim, dim)
        self.v = torch.nn.Linear(dim, dim)

    def forward(self, h):
        # attention written out: flash attention's result would take the layout of a joined q
        # (another layout than the graph was traced with), so those projections stay apart
        q, k, v = (p(h).view(*h.shape[:2], 4, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        scores = torch.softmax(q @ k.transpose(-1, -2) / 8.0, -1)
        return h + (scores @ v).transpose(1, 2).reshape(h.shape)


@pytest.mark.parametrize("options", [None, {"cudagraphs": True}], ids=["plain", "cudagraphs"])
def test_joined_weights_follow_weights_changed_in_place_between_replays(options):
    torch.manual_seed(0)
    model = ThreeProjections().cuda().to(torch.bfloat16).eval()
    h = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint", options=options)
    with torch.no_grad():
        for _ in range(3):  # the first call runs, the second records, the third replays
            torch.testing.assert_close(compiled(h), model(h), atol=3e-2, rtol=3e-2)
        model.k.weight.mul_(-1.0)  # in place: same storage, a new version
        model.v.bias.add_(1.0)
        torch.testing.assert_close(compiled(h), model(h), atol=3e-2, rtol=3e-2)
    assert [r.joined for r in reports_since(mark)] == [2]


class ConvStack(torch.nn.Module):
    """3x3 convolutions, whose weights the layout pass reads in channels_last (a kept copy each)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(16, 64, 3, padding=1, bias=False)
        self.b = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)

    def forward(self, x):
        return self.b(F.relu(self.a(x))).relu()


@pytest.mark.parametrize("options", [None, {"cudagraphs": True}], ids=["plain", "cudagraphs"])
def test_kept_weight_copies_follow_weights_changed_between_replays(options):
    torch.manual_seed(0)
    model = ConvStack().cuda().to(torch.bfloat16).eval()
    x = torch.randn(8, 16, 32, 32, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint", options=options)
    with torch.no_grad():
        for _ in range(3):  # the first call runs, the second records, the third replays
            first = compiled(x).clone()
        model.b.weight.mul_(-1.0)  # in place: same storage, a new version
        torch.testing.assert_close(compiled(x), model(x), atol=3e-2, rtol=3e-2)
        model.b.weight.mul_(-1.0)
        assert torch.equal(compiled(x), first)  # the copy back as it was: the same result, bit for bit
    assert [r.kept for r in reports_since(mark)] == [2]


def test_cudagraphs_outputs_are_lent_moved_when_kept_and_never_overwritten_under_a_view():
    model, ids = _model_and_ids(torch.bfloat16)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint", options={"cudagraphs": True}, dynamic=False)
    other = torch.randint(0, 512, (4, 128), device="cuda", generator=torch.Generator("cuda").manual_seed(9))
    # every call a tensor at an address of its own (kept alive, so none is reused): all copied
    # into the one recording's buffer
    fresh = {id(t): iter([t.clone() for _ in range(8)]) for t in (ids, other)}

    def new(t):
        return next(fresh[id(t)])

    # bf16 outputs: a value near 0 after cancellation differs by an ulp of its terms (~0.03)
    with torch.no_grad():
        for _ in range(3):  # compile, record, first replay
            compiled(new(ids))
        first = compiled(new(ids)).data_ptr()
        assert compiled(new(ids)).data_ptr() == first  # dropped outputs: the same memory, no copy
        kept = compiled(new(ids))
        moved = compiled(new(other))  # `kept` is moved to memory of its own before this replay
        assert kept.data_ptr() != first and moved.data_ptr() == first
        torch.testing.assert_close(kept, model(ids), atol=6e-2, rtol=3e-2)
        row = compiled(new(ids))[0]  # a view of the recording's memory: the next call must not write it
        want_row = model(ids)[0]
        torch.testing.assert_close(compiled(new(other)), model(other), atol=6e-2, rtol=3e-2)
        torch.testing.assert_close(row, want_row, atol=6e-2, rtol=3e-2)
    replays = [r.replay for r in reports_since(mark) if r.replay is not None]
    assert sum(r.recordings for r in replays) == 1 and sum(r.held for r in replays) == 1


def test_cudagraphs_training_step_matches_eager_grads():
    model, ids = _model_and_ids()
    model.train()
    ref = {n: p.detach().clone() for n, p in model.named_parameters()}
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fuselint", options={"cudagraphs": True})
    for _ in range(3):
        model.zero_grad()
        compiled(ids).square().mean().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model(ids).square().mean().backward()
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), ref[n])
        torch.testing.assert_close(got[n], p.grad, atol=1e-4, rtol=1e-3)


def test_calls_after_the_first_run_the_generated_function_and_match_eager():
    model, ids = _model_and_ids(torch.bfloat16)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint")
    with torch.no_grad():
        compiled(ids)
        (report,) = reports_since(mark)
        assert report.runner.call is not None, report.runner.why_not
        for step in range(3):
            ids = torch.randint(
                0, 512, (4, 128), device="cuda", generator=torch.Generator("cuda").manual_seed(step)
            )
            torch.testing.assert_close(compiled(ids), model(ids), atol=3e-2, rtol=3e-2)
    # after the first call no kernel went through its FusedKernel: all launched from the function
    assert all(k.calls == 1 and k.fallback_calls == 0 for k in report.kernels)


def test_cudagraphs_replay_survives_cublas_workspaces_cleared_elsewhere():
    """Inductor's CUDA graph trees (and memory clean-up code) clear cuBLAS's workspaces; a
    recording must not replay into the workspace it warmed up with, which is then freed,
    unmapped by empty_cache and handed to other tensors (HF LLaMA faulted beside
    reduce-overhead before recordings owned their workspace)."""
    model, ids = _model_and_ids(torch.bfloat16, batch=8)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fuselint", options={"cudagraphs": True})
    with torch.no_grad():
        want = model(ids)
        for _ in range(3):  # compile, record, first replay
            compiled(ids)
        # What a reduce-overhead recording does beside ours: clear, record its own matmuls.
        other = torch.compile(lambda a, b: (a @ b).relu(), mode="reduce-overhead")
        a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            other(a, a)
        torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.empty_cache()
        # Memory freed above is handed to new tensors: a replay writing there would change them.
        filler = [torch.full((1 << 22,), 7.0, device="cuda") for _ in range(32)]
        for _ in range(20):
            got = compiled(ids)
        torch.cuda.synchronize()
    torch.testing.assert_close(got, want, atol=3e-2, rtol=3e-2)
    assert all(bool((f == 7.0).all()) for f in filler)


def test_kernels_compile_on_the_thread_pool_before_the_first_call(monkeypatch):
    monkeypatch.setenv("FUSELINT_COMPILE_THREADS", "4")
    model, ids = _model_and_ids()
    torch._dynamo.reset()
    start = history_mark()
    with torch.no_grad():
        got = torch.compile(model, backend="fuselint")(ids)
        want = model(ids)
    (report,) = reports_since(start)
    distinct = distinct_launches(report.kernels)
    assert len(distinct) >= 2
    assert report.precompiled == len(distinct), (report.precompiled, [k.__name__ for k in report.kernels])
    assert all(k._fast is not None for k in report.kernels)  # each ran its compiled binary
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_dropout_draws_inside_the_kernels_on_the_gpu():
    def two_dropouts(x):
        return F.dropout(x * 2, 0.3, training=True), F.dropout(x + 1, 0.3, training=True)

    torch.manual_seed(0)
    x = torch.randn(256, 384, device="cuda", requires_grad=True)
    torch._dynamo.reset()
    start = history_mark()
    f = torch.compile(two_dropouts, backend="fuselint")
    a, b = f(x)
    (a.sum() + b.sum()).backward()
    code = reports_since(start)[0].graph_module.code
    assert "aten.rand." not in code and code.count("aten.randint.low") == 1, code
    kept_a, kept_b = a != 0, b != 0
    for kept in (kept_a, kept_b):
        assert abs(kept.float().mean().item() - 0.7) < 0.01
    torch.testing.assert_close(a[kept_a], (x * 2)[kept_a] / 0.7)
    assert not torch.equal(kept_a, kept_b)
    torch.testing.assert_close(x.grad, kept_a.float() * 2 / 0.7 + kept_b.float() / 0.7)
    assert not torch.equal(f(x)[0] != 0, kept_a)


def test_embedding_backward_is_one_scatter_add_and_matches_eager():
    model, ids = _model_and_ids()
    model.train()
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint")
    compiled(ids).square().mean().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model(ids).square().mean().backward()
    code = "".join(r.graph_module.code for r in reports_since(mark) if "backward" in r.graph)
    assert code.count("fuselint.masked_index_add") == 2, code  # token and position tables
    for n, p in model.named_parameters():
        torch.testing.assert_close(got[n], p.grad, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("layout", [torch.channels_last, torch.contiguous_format], ids=["nhwc", "nchw"])
def test_max_pool_kernels_match_cuda_aten_exactly(layout):
    from fuselint.backend.max_pool import max_pool2d_grad, max_pool2d_with_indices

    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(4, 70, 33, 31, device="cuda", generator=g).to(torch.bfloat16)
    x[0, :5] = x[0, :5].round()  # ties among small integers: the first maximum wins
    x[1, 3, 4, 5] = x[1, 3, 5, 6] = float("nan")
    x[2, 7] = float("-inf")  # windows that take no tap: index 0 in channels_last, the first tap in NCHW
    x = x.to(memory_format=layout)
    args = ([3, 3], [2, 2], [1, 1])
    want = torch.ops.aten.max_pool2d_with_indices(x, *args, [1, 1], True)
    got = max_pool2d_with_indices(x, *args, True)
    assert got[0].stride() == want[0].stride() and torch.equal(got[1], want[1])
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0, equal_nan=True)
    grad = torch.randn(want[0].shape, device="cuda", generator=g).to(torch.bfloat16)
    grad = grad.to(memory_format=layout)
    back = torch.ops.aten.max_pool2d_with_indices_backward(grad, x, *args, [1, 1], True, want[1])
    mine = max_pool2d_grad(grad, x, want[1], *args)
    assert mine.stride() == back.stride() and torch.equal(mine, back)


def test_hand_kernels_launch_the_binary_triton_picked_once_the_arguments_specialize_alike():
    from fuselint.backend.embedding import ADD_ROWS, masked_index_add
    from fuselint.backend.max_pool import POOL_WITH_INDICES, max_pool2d_with_indices

    g = torch.Generator(device="cuda").manual_seed(2)

    def rows(n, dim, offset=0):
        ids = torch.randint(0, 40, (n + offset,), device="cuda", generator=g)[offset:]
        values = torch.randn(n + offset, dim, device="cuda", generator=g)[offset:]
        return ids, values

    fast = []
    for n, dim, offset in [(33, 24, 0), (33, 24, 0), (17, 24, 0), (33, 24, 1), (33, 24, 1), (33, 40, 0)]:
        ids, values = rows(n, dim, offset)  # offset 1: the ids' pointer is no longer 16-byte aligned
        before = ADD_ROWS.fast_launches
        got = masked_index_add(None, [40, dim], None, ids, values)
        want = torch.zeros(40, dim, device="cuda").index_put_((ids,), values, accumulate=True)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        fast.append(ADD_ROWS.fast_launches > before)
    # repeats (the row count sizes only the grid) go to the saved binary; an unaligned pointer
    # is a new specialization, so Triton picks (or compiles) its binary first
    assert fast[1:5] == [True, True, False, True], fast
    x = torch.randn(2, 8, 15, 15, device="cuda", generator=g).to(torch.bfloat16)
    fast = POOL_WITH_INDICES.fast_launches
    for _ in range(3):
        out, idx = max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], False)
        want = torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
        assert torch.equal(out, want[0]) and torch.equal(idx, want[1])
    assert POOL_WITH_INDICES.fast_launches - fast == 2


def test_max_pool_gradient_is_the_gather_kernel_and_matches_eager():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False).cuda().to(torch.bfloat16)
    x = torch.randn(4, 3, 64, 64, device="cuda", dtype=torch.bfloat16)

    def step(f):
        conv.zero_grad()
        f(x).float().square().mean().backward()
        return conv.weight.grad.clone()

    def stem(x):
        return F.max_pool2d(torch.relu(conv(x)), 3, 2, 1)

    torch._dynamo.reset()
    mark = history_mark()
    got = step(torch.compile(stem, backend="fuselint"))
    code = "".join(r.graph_module.code for r in reports_since(mark) if "backward" in r.graph)
    assert "fuselint.max_pool2d_grad" in code, code
    forward = "".join(r.graph_module.code for r in reports_since(mark) if "backward" not in r.graph)
    assert "fuselint.max_pool2d_with_indices" in forward, forward
    torch.testing.assert_close(got, step(stem), atol=2e-2, rtol=2e-2)


class _ConvBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(64)
        self.proj = torch.nn.Conv2d(64, 64, 1, bias=False)

    def forward(self, x):
        return torch.relu(self.proj(torch.relu(self.bn(self.conv(x * 2))))) + 1


def _conv_runner(dtype):
    torch.manual_seed(0)
    model = _ConvBlock().cuda().to(dtype).eval().to(memory_format=torch.channels_last)
    x = torch.randn(8, 32, 28, 28, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend="fuselint")
    with torch.no_grad():
        compiled(x)
    (report,) = reports_since(mark)
    assert report.runner.call is not None, report.runner.why_not
    return compiled, x, report.runner


def test_half_convolutions_call_cudnn_directly_with_the_results_aten_gives():
    compiled, x, runner = _conv_runner(torch.bfloat16)
    assert runner.source.count("cudnn_benchmark, cudnn_deterministic, cudnn_tf32)") == 2, runner.source
    scope = runner.call.__globals__  # through torch's binding, which parses its arguments faster
    calls = [scope[k] for k in scope if re.fullmatch(r"_cudnn\d+", k)]
    assert calls == [torch._C._VariableFunctions.cudnn_convolution], runner.source
    # a convolution's result starts its own storage: no alignment check before a kernel reads it
    assert "v_convolution" in runner.source and not re.search(r"v_convolution\w*\.data_ptr", runner.source)
    # both ReLU kernels store into the convolution's result they read, which dies there; the FX
    # graph's kernels write new buffers, and the results are bit-equal (below)
    assert runner.source.count("in place of a dying input") == 2, runner.source
    with torch.no_grad():
        direct = compiled(x)
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True):
            deterministic = compiled(x)  # the flags are read per call
        with torch.backends.cudnn.flags(enabled=False):
            off = compiled(x)  # cuDNN off: the FX graph, where ATen picks another backend
            want_off = compiled._orig_mod(x)
        call, runner.call = runner.call, None  # the FX graph the function replaces
        try:
            via_fx = compiled(x)
        finally:
            runner.call = call
    torch.testing.assert_close(via_fx, direct, atol=0, rtol=0)
    torch.testing.assert_close(deterministic, direct, atol=0, rtol=0)
    torch.testing.assert_close(off, want_off, atol=3e-2, rtol=3e-2)


def test_parameters_skip_the_alignment_check_and_user_inputs_keep_it():
    _compiled, _x, runner = _conv_runner(torch.float32)
    head = runner.source.splitlines()[1]
    inputs = [n for n in runner.gm.graph.nodes if n.op == "placeholder"]
    users = [i for i in range(len(inputs)) if i not in runner.static]
    assert len(users) == 1 and len(runner.static) == len(inputs) - 1
    assert f"a{users[0]}.data_ptr() & 15" in head, head  # x * 2 reads the user's input
    assert all(f"a{i}.data_ptr()" not in head for i in runner.static), head  # BatchNorm's stats


def test_float32_convolutions_call_cudnn_directly_with_the_convolutions_own_tf32_flag():
    compiled, x, runner = _conv_runner(torch.float32)
    assert runner.source.count("cudnn_benchmark, cudnn_deterministic, cudnn_tf32)") == 2, runner.source
    conv = torch.backends.cudnn.conv
    saved = conv.fp32_precision
    results = {}
    try:
        with torch.no_grad():
            for precision in ("tf32", "ieee"):
                conv.fp32_precision = precision  # apart from the RNN's: the legacy getter would raise
                direct = compiled(x)
                call, runner.call = runner.call, None  # the FX graph, through aten.convolution
                try:
                    results[precision] = (direct, compiled(x))
                finally:
                    runner.call = call
    finally:
        conv.fp32_precision = saved
    for direct, via_fx in results.values():
        torch.testing.assert_close(direct, via_fx, atol=0, rtol=0)
    # the flag reaches cuDNN: TF32 and IEEE results differ
    assert not torch.equal(results["tf32"][0], results["ieee"][0])


def test_a_patch_embedding_runs_as_one_gemm_on_the_gpu_and_matches_eager_in_float32():
    # ViT's stem in miniature: 16 x 16 patches of a 3-channel image (fuselint/backend/patchify.py)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 64, 16, stride=16).cuda().eval()
    x = torch.randn(4, 3, 64, 64, device="cuda")

    def tokens(x):
        return torch.nn.functional.layer_norm(conv(x).flatten(2).transpose(1, 2), (64,))

    torch._dynamo.reset()
    mark = history_mark()
    with torch.no_grad():
        got = torch.compile(tokens, backend="fuselint")(x)
        torch.backends.cudnn.allow_tf32, tf32 = False, torch.backends.cudnn.allow_tf32
        try:
            want = tokens(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
    (report,) = reports_since(mark)
    targets = [n.target for n in report.graph_module.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.convolution.default not in targets
    # one GEMM; its bias is added by the kernel after it (fuselint/backend/bias.py)
    assert {torch.ops.aten.addmm.default, torch.ops.aten.mm.default} & set(targets)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
