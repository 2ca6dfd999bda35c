"""The generated call function (fuselint.backend.callgen), on CPU through Triton's interpreter.

CPU kernels have no fast launcher (that is Triton's CUDA launcher), so each kernel gets a
stand-in with the same calling convention that launches through Triton's JIT path: the
generated code, its frees, its ATen entry points and its checks are the ones a GPU runs.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from backend_helpers import StandInLaunch, needs_interpreter, stand_in_call_function

from fuselint.backend import callgen, fuselint_backend, history_mark, reports_since, runtime

pytestmark = needs_interpreter


def block(x, w, r, g, b):
    h = F.gelu(x @ w) + r
    y = F.layer_norm(h, (h.shape[-1],), g, b)
    # views of an ATen result at an offset into its storage, read by ATen
    heads = (y @ w).view(8, 4, 8)[:, 1:].permute(1, 0, 2)
    return y * 2, h, heads @ heads.transpose(1, 2)


def inputs(seed: int):
    torch.manual_seed(seed)
    return torch.randn(8, 32), torch.randn(32, 32), torch.randn(8, 32), torch.randn(32), torch.randn(32)


def compiled_with_stand_ins():
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(block, backend=fuselint_backend)
    fn(*inputs(0))
    (report,) = reports_since(mark)
    assert report.runner.call is None  # CPU kernels: no fast launcher, the FX graph runs
    stand_ins = stand_in_call_function(report)
    return fn, report, stand_ins


def test_the_generated_function_computes_what_eager_does_with_one_launch_per_kernel():
    fn, report, stand_ins = compiled_with_stand_ins()
    assert report.runner.call is not None, report.runner.why_not
    source = report.runner.source
    assert "FusedKernel" not in source and "forward" not in source.split("\n", 3)[-1]
    assert "del " in source  # values are freed after their last use
    # views reinterpret their base's storage; those of the matmul's result only once its
    # strides are checked (else the view ops run)
    assert " if ok_mm_1 else " in source
    assert "aten.view" not in source and "forward" not in source.split("\n", 3)[-1]
    for seed in (1, 2):
        got = fn(*inputs(seed))
        want = block(*inputs(seed))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
    assert [s.launches for s in stand_ins] == [2] * len(stand_ins)
    assert all(k.calls == 1 for k in report.kernels)  # FusedKernel ran only the first call


def test_a_kernel_reading_an_aten_result_checks_its_strides_and_otherwise_calls_its_kernel():
    fn, report, stand_ins = compiled_with_stand_ins()
    source = report.runner.source
    # the GELU kernel reads the matmul's result: its layout is checked per call
    assert ".stride() == (32, 1)" in source and "else:" in source
    first = next(k for k in report.kernels if "gelu" in k.__name__ or "erf" in k.__name__)
    first.in_strides = tuple((1, 8) if s == (32, 1) else s for s in first.in_strides)
    report.runner._generate()  # as if the kernel had been built for another layout
    got = fn(*inputs(3))
    torch.testing.assert_close(got[1], block(*inputs(3))[1], atol=1e-5, rtol=1e-5)
    # through FusedKernel, which found the layout wrong and ran ATen
    assert (first.calls, first.fallback_calls) == (1, 1)


def _column_major(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values in the other order of its last two dimensions' strides."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def test_a_chain_of_views_is_made_from_its_root_and_step_by_step_where_the_root_is_laid_out_otherwise():
    fn, report, stand_ins = compiled_with_stand_ins()
    source = report.runner.source
    # heads = view(8, 4, 8), [:, 1:], permute; then the transpose and both expands of the bmm: the
    # two views the bmm reads are made on the fast path, from the matmul's result at the slice's
    # offset; the six steps before them run only as the fallback's
    steps = re.findall(r"(v_\w+) = None if (ok_mm\w*) else ", source)
    assert len(steps) == 6 and len({ok for _, ok in steps}) == 1, source
    root = steps[0][1].removeprefix("ok_")
    for strides in ("(8, 32, 1)", "(8, 1, 32)"):
        made = rf"= _view\d+\(v_{root}, \(3, 8, 8\), {re.escape(strides)}, 8\) if ok_{root} else "
        assert re.search(made, source), source
    skipped = "|".join(name for name, _ in steps)
    assert not re.search(rf"_view\d+\(({skipped})\b", source), source  # nothing is made from a skipped step
    scope = report.runner.call.__globals__
    for name in [k for k in scope if k.startswith("_mm")]:  # ATen's matmuls laid out column-major
        scope[name] = lambda *a, _real=scope[name], **kw: _column_major(_real(*a, **kw))
    for seed in (5, 6):  # (a column-major matmul operand sums in another order: 5e-5 of 4)
        got = fn(*inputs(seed))
        for g, w in zip(got, block(*inputs(seed)), strict=True):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_a_launch_hook_sends_the_whole_call_through_the_fx_graph(monkeypatch):
    fn, report, stand_ins = compiled_with_stand_ins()

    class Knobs:
        launch_enter_hook = staticmethod(lambda *a: None)
        launch_exit_hook = None

    monkeypatch.setattr(runtime, "_KNOBS_RUNTIME", Knobs())
    got = fn(*inputs(4))
    torch.testing.assert_close(got[0], block(*inputs(4))[0], atol=1e-5, rtol=1e-5)
    assert all(s.launches == 0 for s in stand_ins)
    assert all(k.calls == 2 for k in report.kernels)


def test_no_function_without_fast_launchers(monkeypatch):
    fn, report, _ = compiled_with_stand_ins()
    monkeypatch.setattr(runtime, "FAST_LAUNCH", False)
    assert callgen.generate(report.graph_module) is None


def test_a_gpt_style_block_with_chunked_heads_matches_eager_through_the_generated_function():
    from test_backend_runtime_gpu import Block

    torch.manual_seed(0)
    model = Block(seq=16).eval()
    ids = torch.randint(0, 512, (2, 16))
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(model, backend=fuselint_backend)
    with torch.no_grad():
        fn(ids)
        (report,) = reports_since(mark)
        for k in report.kernels:
            k._fast = StandInLaunch(k)
        report.runner._generate()
        assert report.runner.call is not None
        # q, k and v are views at offsets 0, 256 and 512 of one matmul's result
        torch.testing.assert_close(fn(ids), model(ids), atol=1e-5, rtol=1e-5)


def chain(x, w):
    a = torch.tanh(x) * 2  # kernel 1: a dies once the matmul has read it
    b = torch.sigmoid(a @ w) + 1  # kernel 2: same layout as a, takes a's buffer
    keep = b.t()  # a view of b, alive until the last matmul
    c = torch.relu(b @ w) * 3  # kernel 3: b is still viewed, so c gets a buffer of its own
    return c @ keep


def test_a_dead_kernel_output_is_handed_to_a_later_kernel_of_its_layout_and_a_viewed_one_is_not(monkeypatch):
    monkeypatch.setattr(callgen, "_in_place_plan", lambda nodes: {})  # the pool alone (in place: below)
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(chain, backend=fuselint_backend)
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    fn(x, w)
    (report,) = reports_since(mark)
    assert len(report.kernels) == 3
    for k in report.kernels:
        k._fast = StandInLaunch(k)
    report.runner._generate()
    source = report.runner.source
    reuses = [line.strip() for line in source.splitlines() if "a dead buffer of this layout" in line]
    assert len(reuses) == 1, source  # b takes a's storage; c cannot take b's (b's view lives on)
    # b's storage dies with its last view (the final matmul), not at the matmul reading b itself
    nodes = list(report.graph_module.graph.nodes)
    plan = callgen._reuse_plan(nodes)
    b_item = next(n for n in nodes if n.name in plan and "sigmoid" in n.args[0].name)
    assert nodes[plan[b_item.name]].name == [n for n in nodes if n.name.startswith("mm")][-1].name
    taken = reuses[0].split(" = ")[1].split()[0]
    later = source.split(reuses[0])[1]
    assert f"del {taken}" in later.splitlines()[1]
    for seed in (1, 2):
        torch.manual_seed(seed)
        x, w = torch.randn(16, 16), torch.randn(16, 16)
        torch.testing.assert_close(fn(x, w), chain(x, w), atol=1e-5, rtol=1e-5)
    assert all(k.calls == 1 for k in report.kernels)  # the generated function ran the later calls


def test_no_buffer_is_reused_in_a_graph_that_mutates():
    nodes = []
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.add_.Tensor, (x, x))
    g.output(y)
    nodes = list(g.nodes)
    assert callgen._reuse_plan(nodes) == {}


def test_a_buffer_from_the_aten_fallback_is_a_fresh_copy_that_a_later_kernel_may_take():
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(chain, backend=fuselint_backend)
    torch.manual_seed(0)
    fn(torch.randn(16, 16), torch.randn(16, 16))
    (report,) = reports_since(mark)
    for k in report.kernels:
        k._fast = StandInLaunch(k)
        # every kernel that reads a matmul's result was built for another layout: ATen runs it
        k.in_strides = tuple((1, 16) if s == (16, 1) else s for s in k.in_strides)
    report.runner._generate()
    assert "_own" in report.runner.source
    for seed in (3, 4):
        torch.manual_seed(seed)
        x, w = torch.randn(16, 16), torch.randn(16, 16)
        torch.testing.assert_close(fn(x, w), chain(x, w), atol=1e-5, rtol=1e-5)


def embed_then_scale(table, ids):
    return (F.embedding(ids, table) * 2).square().sum(-1)


def _table_grad(f, seed: int):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(20, 8, generator=g).requires_grad_()
    ids = torch.randint(0, 20, (3, 9), generator=g)
    ids[0] = 5  # one row hit many times
    f(table, ids).sum().backward()
    return table.grad


def test_fuselints_own_ops_are_called_as_their_python_body_not_through_the_dispatcher(monkeypatch):
    from fuselint.backend import embedding

    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(embed_then_scale, backend=fuselint_backend)
    _table_grad(fn, 0)
    (backward,) = [r for r in reports_since(mark) if "backward" in r.graph]
    for k in backward.kernels:
        k._fast = StandInLaunch(k)
    backward.runner._generate()
    assert backward.runner.call is not None, backward.runner.why_not
    called = [
        o
        for o in backward.runner.call.__globals__.values()
        if o is runtime.DIRECT_IMPLS["fuselint::masked_index_add"]
    ]
    assert called and called[0] is embedding.masked_index_add._init_fn
    # the body runs, the op's dispatcher entry does not
    calls = []
    body = runtime.DIRECT_IMPLS["fuselint::masked_index_add"]
    monkeypatch.setitem(
        backward.runner.call.__globals__, _name_of(backward.runner.call, body), _counting(body, calls)
    )
    for seed in (1, 2):
        torch.testing.assert_close(
            _table_grad(fn, seed), _table_grad(embed_then_scale, seed), atol=1e-5, rtol=1e-5
        )
    assert len(calls) == 2


def _name_of(call, obj) -> str:
    return next(name for name, value in call.__globals__.items() if value is obj)


def _counting(fn, calls: list):
    def counted(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return counted


class RecordingLaunch(StandInLaunch):
    """A stand-in that also records, per launch, which outputs share an input's address."""

    def __init__(self, kernel: runtime.FusedKernel) -> None:
        super().__init__(kernel)
        self.shared: list[list[bool]] = []

    def run(self, g0, g1, g2, stream, function, packed, h1, h2, h3, *rest):
        n_in, n_out = len(self.kernel.in_strides), len(self.kernel.out_specs)
        ins = {t.data_ptr() for t in rest[:n_in] if isinstance(t, torch.Tensor)}
        self.shared.append([t.data_ptr() in ins for t in rest[n_in : n_in + n_out]])
        super().run(g0, g1, g2, stream, function, packed, h1, h2, h3, *rest)


def generated_with_recording(fn, *args):
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(fn, backend=fuselint_backend)
    compiled(*args)
    (report,) = reports_since(mark)
    launches = {}
    for k in report.kernels:
        k._fast = launches[k.__name__] = RecordingLaunch(k)
    report.runner._generate()
    assert report.runner.call is not None, report.runner.why_not
    return compiled, report, launches


def gelu_of_matmul_then_scaled(x, w):
    h = F.gelu(x @ w)  # kernel 1: reads the matmul's result, which dies there
    g = torch.tanh(h @ w) * h  # kernel 2: h is read here too, so the matmul's result alone dies
    return g.view(4, 64).sin() + 1  # kernel 3 reads g through a view of the same element order


def test_a_pointwise_kernel_stores_into_the_input_that_dies_with_it():
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    compiled, report, launches = generated_with_recording(gelu_of_matmul_then_scaled, x, w)
    source = report.runner.source
    assert source.count("in place of a dying input") == 3, source
    for seed in (1, 2):
        torch.manual_seed(seed)
        x, w = torch.randn(16, 16), torch.randn(16, 16)
        torch.testing.assert_close(compiled(x, w), gelu_of_matmul_then_scaled(x, w), atol=1e-5, rtol=1e-5)
    assert all(launch.shared == [[True], [True]] for launch in launches.values()), launches
    assert all(k.calls == 1 for k in report.kernels)


def kept_and_reread(x, w):
    m = x @ w
    a = torch.relu(m) + 1  # m is returned: its storage must survive
    b = x @ w
    c = torch.sigmoid(b.t()) * 2  # read transposed: another program may still read what one writes
    d = x @ w
    e = d + d.sum(-1, keepdim=True)  # a reduction over d in the same kernel
    f = x @ w
    g = (f[:, :1] * f).cos()  # f is read twice, once broadcast
    return m, a, c, e, g


def test_no_output_is_stored_into_a_kept_transposed_reduced_or_broadcast_input():
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    compiled, report, launches = generated_with_recording(kept_and_reread, x, w)
    assert "in place of a dying input" not in report.runner.source, report.runner.source
    assert callgen._in_place_plan(list(report.graph_module.graph.nodes)) == {}
    torch.manual_seed(5)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    for got, want in zip(compiled(x, w), kept_and_reread(x, w), strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert all(not any(s) for launch in launches.values() for s in launch.shared)


def test_an_input_taken_in_place_leaves_the_pool_of_dead_buffers():
    # the pool would hand a's storage to b's kernel after the matmul; in place, b's kernel stores
    # into the matmul's result instead, and a's storage is never given to anything else
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    compiled, report, _ = generated_with_recording(chain, x, w)
    source = report.runner.source
    assert source.count("in place of a dying input") == 2 and "a dead buffer" not in source, source
    torch.manual_seed(7)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    torch.testing.assert_close(compiled(x, w), chain(x, w), atol=1e-5, rtol=1e-5)


def test_in_place_stores_can_be_switched_off_for_comparison(monkeypatch):
    monkeypatch.setattr(callgen, "IN_PLACE", False)
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    compiled, report, launches = generated_with_recording(gelu_of_matmul_then_scaled, x, w)
    assert "in place of a dying input" not in report.runner.source
    torch.testing.assert_close(compiled(x, w), gelu_of_matmul_then_scaled(x, w), atol=1e-5, rtol=1e-5)
    assert all(not any(s) for launch in launches.values() for s in launch.shared)


def transposed(x, w):
    h = torch.tanh(x) * 2  # a kernel's output: laid out as the graph says, never checked
    return h.view(4, 64).t() @ w  # the matmul reads the transpose of a view of it


def test_the_steps_of_a_view_chain_over_a_kernel_output_are_not_made_at_all():
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(transposed, backend=fuselint_backend)
    torch.manual_seed(0)
    args = (torch.randn(8, 32), torch.randn(4, 16))
    fn(*args)
    (report,) = reports_since(mark)
    stand_in_call_function(report)
    source = report.runner.source
    assert report.runner.call is not None, report.runner.why_not
    assert "ok_" not in source and "None if" not in source, source
    made = re.findall(r"(v_\w+) = _view\d+\((v_\w+), \(64, 4\), \(1, 64\), 0\)", source)
    assert len(made) == 1 and made[0][1].startswith("v_fuselint_"), source  # the transpose, from the output
    assert not re.search(r"v_view\b", source), source  # view(4, 64) is never made
    for seed in (1, 2):
        torch.manual_seed(seed)
        args = (torch.randn(8, 32), torch.randn(4, 16))
        torch.testing.assert_close(fn(*args), transposed(*args), atol=1e-5, rtol=1e-5)
