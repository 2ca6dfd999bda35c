"""A graph with no kernel of fuselint's (ATen ops only) runs through a generated call function
too: its ops called through their C entry points, not through the FX graph's forward."""

from __future__ import annotations

import torch

from fuselint.backend import fuselint_backend, history_mark, reports_since


def matmuls(x, w1, w2):
    return (x @ w1.t()) @ w2.t()


def test_a_graph_of_matmuls_only_gets_a_call_function_that_computes_what_eager_does():
    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(matmuls, backend=fuselint_backend)
    torch.manual_seed(0)
    args = (torch.randn(8, 16), torch.randn(16, 16), torch.randn(16, 16))
    with torch.no_grad():
        first = fn(*args)
    (report,) = reports_since(mark)
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
