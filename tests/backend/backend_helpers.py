"""Shared helpers: ATen graphs of small functions, tolerances per dtype."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx

from fuselint.backend import fuselint_backend, history_mark, reports_since, runtime
from fuselint.backend.runtime import interpreter_ready

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Kernels on CPU tensors need the interpreter; on a CUDA machine the GPU tests cover them.
needs_interpreter = pytest.mark.skipif(
    not interpreter_ready(),
    reason="kernels on CPU tensors need TRITON_INTERPRET=1 set before triton is imported",
)


def tol(dtype: torch.dtype) -> dict:
    """Comparison tolerance: fp32 math everywhere, stores round (bf16 truncates in the interpreter)."""
    if dtype == torch.bfloat16:
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype == torch.float16:
        return {"atol": 2e-3, "rtol": 2e-3}
    return {"atol": 1e-5, "rtol": 1e-5}


def aten_graph(fn, *args) -> torch.fx.GraphModule:
    """The ATen graph of `fn` after Inductor's decompositions, with fake values on nodes."""
    return make_fx(fn, decomposition_table=select_decomp_table(), tracing_mode="fake")(*args)


def flat(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


class Unlaunchable:
    """Stands in for a @triton.jit kernel that cannot compile or launch here: `kernel[grid](...)` raises."""

    def __getitem__(self, grid):
        raise RuntimeError("no kernel here")


class StandInLaunch:
    """FastLaunch's fields, launching through the kernel's JIT path (a CPU kernel has no fast
    launcher: with this stand-in, the generated call function runs on CPU as it runs on a GPU)."""

    def __init__(self, kernel: runtime.FusedKernel) -> None:
        self.kernel = kernel
        self.grid = (kernel.cfg.grid, 1, 1)
        self.function = object()
        self.packed = object()
        self.consts = tuple(kernel.consts.values())
        self.device_index = 0
        self.stream_of = lambda index: 0
        self.aligned = tuple(False for _ in kernel.in_strides)
        self.alloc = None
        self.launches = 0

    def matches(self, args, strides) -> bool:
        return False  # FusedKernel's own path: its layout check, then the JIT launch or ATen

    def run(self, g0, g1, g2, stream, function, packed, h1, h2, h3, *rest):
        assert (g0, g1, g2) == self.grid and function is self.function and packed is self.packed
        n_in, n_out = len(self.kernel.in_strides), len(self.kernel.out_specs)
        args, outs = rest[:n_in], rest[n_in : n_in + n_out]
        assert tuple(rest[n_in + n_out :]) == self.consts
        self.launches += 1
        self.kernel._launch_jit(args, outs)


def compiled_once(fn, args: tuple):
    """`fn` compiled with fuselint and called once without grad: (compiled, its output, the report)."""
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(fn, backend=fuselint_backend)
    with torch.no_grad():
        out = compiled(*args)
    (report,) = reports_since(mark)
    return compiled, out, report


def stand_in_call_function(report) -> list:
    """Give each kernel of a CPU-compiled graph's `report` a stand-in fast launcher and build the
    graph's call function (callgen); the stand-ins, which count their launches."""
    stand_ins = []
    for k in report.kernels:
        k._fast = StandInLaunch(k)
        stand_ins.append(k._fast)
    report.runner._generate()
    return stand_ins
