"""A graph with no kernel of fuselint's (ATen ops only) runs through a generated call function
too: its ops called through torch's bindings or their C entry points, not through the FX graph's
forward."""

from __future__ import annotations

import torch
from backend_helpers import compiled_once, needs_interpreter, stand_in_call_function

from fuselint.backend import fuselint_backend, history_mark, reports_since


def matmuls(x, w1, w2):
    return (x @ w1.t()) @ w2.t()


def test_a_graph_of_matmuls_only_gets_a_call_function_that_computes_what_eager_does():
    torch.manual_seed(0)
    args = (torch.randn(8, 16), torch.randn(16, 16), torch.randn(16, 16))
    fn, first, report = compiled_once(matmuls, args)
    assert not report.kernels
    runner = report.runner
    assert runner.call is not None, runner.why_not
    body = runner.source.split("\n", 3)[-1]
    assert "forward" not in body and "aten" not in body and "s = " not in body  # no kernel: no stream
    torch.testing.assert_close(first, matmuls(*args))
    scope = runner.call.__globals__  # the FX graph's forward, which the function falls back to
    (slow_name,) = [k for k in scope if k.startswith("_slow")]
    slow = scope[slow_name]
    ran = []

    def watched(*a):
        ran.append(True)
        return slow(*a)

    scope[slow_name] = watched
    try:
        for seed in (1, 2):
            torch.manual_seed(seed)
            other = (torch.randn(8, 16), torch.randn(16, 16), torch.randn(16, 16))
            with torch.no_grad():
                torch.testing.assert_close(fn(*other), matmuls(*other))
    finally:
        scope[slow_name] = slow
    assert not ran  # the generated function ran the calls, not the FX graph


def chain(x, w1, w2, w3, b):
    h = x @ w1  # dies at the second matmul: the third one writes into its buffer
    h = h @ w2
    h = h @ w3
    return torch.baddbmm(b, h[None], w1[None], beta=0.5, alpha=2.0)


def chain_inputs(seed: int):
    torch.manual_seed(seed)
    return (
        torch.randn(8, 16),
        torch.randn(16, 16),
        torch.randn(16, 16),
        torch.randn(16, 16),
        torch.randn(1, 8, 16),
    )


def test_matmuls_run_through_torch_s_bindings_and_write_into_dead_buffers_of_their_layout():
    fn, first, report = compiled_once(chain, chain_inputs(0))
    runner = report.runner
    assert runner.call is not None, runner.why_not
    source = runner.source
    scope = runner.call.__globals__
    bindings = {scope[name] for name in scope if name.startswith("_mm")}
    assert bindings == {torch.mm, torch.baddbmm}, source
    assert source.count("out=v_") == 1, source  # the third matmul takes the first one's buffer
    # the two that die write into new buffers of their layout, which the pool can vouch for
    assert source.count("out=_empty") == 2, source
    assert "beta=0.5, alpha=2.0" in source
    torch.testing.assert_close(first, chain(*chain_inputs(0)))
    for seed in (1, 2):
        with torch.no_grad():
            torch.testing.assert_close(fn(*chain_inputs(seed)), chain(*chain_inputs(seed)))


def test_a_matmul_the_graph_returns_keeps_its_own_storage():
    def both(x, w1, w2):
        h = x @ w1
        return h, h @ w2, (h @ w2) @ w1

    torch.manual_seed(0)
    args = (torch.randn(8, 16), torch.randn(16, 16), torch.randn(16, 16))
    fn, got, report = compiled_once(both, args)
    with torch.no_grad():
        again = fn(*args)
    assert report.runner.call is not None, report.runner.why_not
    for g, a, w in zip(got, again, both(*args), strict=True):
        torch.testing.assert_close(g, w)
        torch.testing.assert_close(a, w)
    storages = {t.untyped_storage().data_ptr() for t in (*got, *again)}
    assert len(storages) == 6  # no returned matmul shares a buffer with another


def _column_major(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def pooled_then_taken(x, w, y):
    m = x @ w  # dies at the next matmul: its buffer goes to the pool
    n = m @ w
    k = torch.tanh(y) * 2  # a kernel output of m's layout takes m's buffer
    return n, k


@needs_interpreter
def test_a_matmul_result_laid_out_otherwise_than_its_fake_is_never_handed_to_a_kernel():
    # review27: ATen may lay out a matmul's result otherwise than its fake tensor says (the
    # views and kernels reading it check); a pooled one was taken by a kernel that stores by the
    # spec's strides, so the kernel's output read back transposed
    torch.manual_seed(0)
    args = (torch.randn(16, 16), torch.randn(16, 16), torch.randn(16, 16))
    fn, _, report = compiled_once(pooled_then_taken, args)
    stand_in_call_function(report)
    assert report.runner.call is not None, report.runner.why_not
    assert "a dead buffer of this layout" in report.runner.source, report.runner.source
    scope = report.runner.call.__globals__
    for name in [k for k in scope if k.startswith("_mm")]:  # ATen's own results column-major
        scope[name] = lambda *a, _real=scope[name], **kw: (
            _real(*a, **kw) if "out" in kw else _column_major(_real(*a, **kw))
        )
    for seed in (1, 2):
        torch.manual_seed(seed)
        args = (torch.randn(16, 16), torch.randn(16, 16), torch.randn(16, 16))
        with torch.no_grad():
            for got, want in zip(fn(*args), pooled_then_taken(*args), strict=True):
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def strided_window(x, w):
    return torch.as_strided(x, (4, 4), (1, 4), 2) @ w


def test_as_strided_of_an_input_at_another_storage_offset_counts_from_the_storage_s_start():
    # review27: the generated function made the view relative to the input's own offset, as for
    # every other view; as_strided's offset is the storage's, and dynamo does not guard an input's
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(strided_window, backend=fuselint_backend)
    torch.manual_seed(0)
    big, w = torch.randn(64), torch.randn(4, 4)
    with torch.no_grad():
        torch.testing.assert_close(fn(big[0:32], w), strided_window(big[0:32], w))
        (report,) = reports_since(mark)
        assert report.runner.call is not None, report.runner.why_not
        for start in (8, 3, 0):
            x = big[start : start + 32]
            torch.testing.assert_close(fn(x, w), strided_window(x, w))
    assert len(reports_since(mark)) == 1  # one graph: the offset is not guarded


def test_an_aten_op_goes_through_its_binding_only_where_the_binding_means_that_overload():
    from fuselint.backend.callgen import _aten_entry, _binding

    aten = torch.ops.aten
    functions = torch._C._VariableFunctions
    # one overload besides `out`: the binding of the same name, called without out=, is that one
    assert _binding(aten.convolution.default) is functions.convolution
    assert _binding(aten.cudnn_convolution.default) is functions.cudnn_convolution
    assert _binding(aten.cat.default) is functions.cat
    # overloads a binding would choose among by the arguments' types: the OpOverload's own entry
    for op in (
        aten.add.Tensor,
        aten.mean.dim,
        aten.mean.default,
        aten._scaled_dot_product_flash_attention.default,
    ):
        assert _binding(op) is None, op
        assert _aten_entry(op) is op._op
    assert _binding(aten._to_copy.default) is None  # no binding of that name
    assert _aten_entry(aten._to_copy.default) is aten._to_copy.default._op
    assert _binding(torch.ops.fuselint.round_to_tf32.default) is None  # fuselint's own: not ATen's
    # a binding wraps a returned int in a tensor: cuDNN attention returns two
    assert _binding(aten._scaled_dot_product_cudnn_attention.default) is None
    # the binding names `self` `input`: a call giving either by name keeps the overload's entry
    assert _aten_entry(aten.cat.default, ("dim",)) is functions.cat
    assert _aten_entry(aten.clone.default, ("self",)) is aten.clone.default._op


def test_a_gpu_op_s_binding_gives_what_its_overload_gives():
    # GPU-only ops that reach the call function through their bindings, checked on the meta
    # device (no kernels there, only the argument parsing and the shapes and dtypes returned)
    aten = torch.ops.aten
    q = torch.empty(2, 4, 16, 8, device="meta", dtype=torch.bfloat16)
    bias = torch.empty(2, 4, 16, 16, device="meta", dtype=torch.bfloat16)
    op = aten._scaled_dot_product_efficient_attention.default
    from fuselint.backend.callgen import _aten_entry

    binding = _aten_entry(op, ("scale",))
    assert binding is torch._C._VariableFunctions._scaled_dot_product_efficient_attention
    want = op(q, q, q, bias, True, 0.0, False, scale=0.5)
    got = binding(q, q, q, bias, True, 0.0, False, scale=0.5)
    assert isinstance(got, tuple) and len(got) == len(want) == 4  # a named tuple: read by index
    for g, w in zip(got, want, strict=True):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride())


def convs(x, w1, w2, b2):
    h = torch.nn.functional.conv2d(x, w1, padding=1)
    return torch.nn.functional.conv2d(h, w2, b2, groups=2)


@needs_interpreter
def test_convolutions_run_through_the_convolution_binding():
    torch.manual_seed(0)
    args = (torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3), torch.randn(6, 2, 1, 1), torch.randn(6))
    fn, first, report = compiled_once(convs, args)
    stand_in_call_function(report)
    runner = report.runner
    assert runner.call is not None, runner.why_not
    scope = runner.call.__globals__
    (op,) = [name for name in scope if name.startswith("_op")]
    assert scope[op] is torch._C._VariableFunctions.convolution, runner.source
    assert runner.source.count(f"= {op}(") == 2, runner.source  # both convolutions, the grouped one with bias
    torch.testing.assert_close(first, convs(*args))
    for seed in (1, 2):
        torch.manual_seed(seed)
        other = (torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3), torch.randn(6, 2, 1, 1), torch.randn(6))
        with torch.no_grad():
            torch.testing.assert_close(fn(*other), convs(*other))
