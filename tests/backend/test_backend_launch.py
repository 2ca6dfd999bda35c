"""The fast launch path: what it hands Triton's launcher, and when it steps back to the JIT path."""

from __future__ import annotations

import types

import pytest
import torch
from backend_helpers import needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since, runtime
from fuselint.backend.runtime import FastLaunch


class _Compiled:
    """Stands in for triton's CompiledKernel: records what its launcher receives."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.function = 1234
        self.packed_metadata = ("meta",)

    @property
    def run(self):
        return lambda *a: self.calls.append(a)


def _fast(aligned=(True, True)) -> tuple[FastLaunch, _Compiled]:
    compiled = _Compiled()
    fast = FastLaunch(compiled, (7,), (1024, 64), 0, aligned)
    fast.stream_of = lambda index: 99 + index
    return fast, compiled


def test_launch_passes_grid_stream_handles_then_every_argument_in_signature_order():
    fast, compiled = _fast()
    a, b, out = torch.randn(8), torch.randn(8), torch.empty(8)
    fast.launch((a, b), (out,))
    (call,) = compiled.calls
    assert call[:9] == (7, 1, 1, 99, 1234, ("meta",), None, None, None)
    assert call[9] is a and call[10] is b and call[11] is out and call[12:] == (1024, 64)


def test_matches_checks_strides_and_alignment(monkeypatch):
    monkeypatch.setattr(runtime, "_KNOBS_RUNTIME", None)
    fast, _ = _fast(aligned=(True, False))
    base = torch.randn(64)
    x, y = base[:16], base[1:17]  # y starts 4 bytes into the buffer
    strides = ((1,), (1,))
    assert fast.matches((x, y), strides)  # y was unaligned when compiled: any pointer is fine
    assert not fast.matches((y, x), strides)  # x's slot was compiled for a 16-byte aligned pointer
    assert not fast.matches((base[::2][:16], x), strides)  # other strides


def test_an_installed_launch_hook_sends_calls_back_to_the_jit_path(monkeypatch):
    fast, _ = _fast()
    x = torch.randn(16)
    chain = types.SimpleNamespace(calls=[])
    monkeypatch.setattr(
        runtime, "_KNOBS_RUNTIME", types.SimpleNamespace(launch_enter_hook=chain, launch_exit_hook=None)
    )
    assert fast.matches((x, x), ((1,), (1,)))
    chain.calls.append(print)
    assert not fast.matches((x, x), ((1,), (1,)))


def test_build_refuses_objects_that_are_not_compiled_kernels():
    kernel = types.SimpleNamespace(grid=(1,), consts={"XBLOCK": 8})
    assert FastLaunch.build(object(), kernel.grid, kernel.consts, (), ()) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fast_path_on_gpu_matches_eager_over_calls_and_falls_back_for_unaligned_inputs():
    fn = lambda x, y: torch.sin(x) * y + 1  # noqa: E731
    torch._dynamo.reset()
    start = history_mark()
    compiled = torch.compile(fn, backend=fuselint_backend, dynamic=False)
    base = torch.randn(4097, device="cuda")
    for _ in range(3):
        x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    (report,) = reports_since(start)
    (kernel,) = report.kernels
    # the first call built the fast launcher; the generated call function launched the others
    assert kernel._fast is not None and report.runner.call is not None and kernel.calls == 1
    x = base[1:]  # 4 bytes past an aligned pointer: the whole call runs the FX graph, whose
    torch.testing.assert_close(compiled(x, y), fn(x, y))  # JIT path specializes again
    assert kernel.calls == 2 and kernel.fallback_calls == 0


@needs_interpreter
def test_a_failing_fast_launcher_is_dropped_and_the_call_goes_through_triton():
    fn = lambda x: torch.cos(x) * 2  # noqa: E731
    torch._dynamo.reset()
    start = history_mark()
    compiled = torch.compile(fn, backend=fuselint_backend, dynamic=False)
    x = torch.randn(64)
    compiled(x)
    (kernel,) = [k for r in reports_since(start) for k in r.kernels]

    class Refusing(_Compiled):
        @property
        def run(self):
            def refuse(*args):
                raise TypeError("bad arguments")

            return refuse

    fast = FastLaunch(Refusing(), kernel.grid, tuple(kernel.consts.values()), 0, (True,))
    fast.stream_of = lambda index: 0
    kernel._fast = fast
    with pytest.warns(UserWarning, match="fast launch"):
        got = compiled(x)
    torch.testing.assert_close(got, fn(x))
    assert kernel._fast is None and kernel.calls == 2 and kernel.fallback_calls == 0
