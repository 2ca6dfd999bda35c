"""Shared helpers: ATen graphs of small functions, tolerances per dtype."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx

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
