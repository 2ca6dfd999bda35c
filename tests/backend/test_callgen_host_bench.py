"""bench/callgen_host.py's launcher that launches nothing stands in for the fast path's launcher:
the call function it generates is the one a GPU runs, with every launch a no-op."""

from __future__ import annotations

import torch
from backend_helpers import needs_interpreter
from bench_loader import bench_module

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.runtime import FastLaunch

pytestmark = needs_interpreter


def test_the_stand_in_has_every_field_of_the_fast_launcher():
    ch = bench_module("callgen_host")
    missing = [
        f
        for f in FastLaunch.__slots__
        if not hasattr(ch.NoLaunch, f) and f not in vars(ch.NoLaunch(_Kernel()))
    ]
    assert missing == []


class _Kernel:
    consts = {"BLOCK": 8}
    in_strides = ((1,), (1,))


def test_a_call_function_with_launches_that_do_nothing_runs_every_line_but_the_launches():
    ch = bench_module("callgen_host")

    def block(x, w):
        return torch.tanh(x @ w) * 2 + 1

    torch._dynamo.reset()
    mark = history_mark()
    fn = torch.compile(block, backend=fuselint_backend)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    fn(x, w)
    (report,) = reports_since(mark)
    (kernel,) = report.kernels
    kernel._fast = ch.NoLaunch(kernel)
    kernel._fast_more = [ch.NoLaunch(kernel) for _ in kernel.more]
    report.runner._generate()
    assert report.runner.call is not None, report.runner.why_not
    out = fn(x, w)  # the kernel's output is allocated and never written
    assert out.shape == (4, 8) and kernel.calls == 1  # FusedKernel ran the first call only
