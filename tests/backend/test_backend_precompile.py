"""Which launches the compile pool warms, and how many threads it takes (no GPU needed)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from fuselint.backend import precompile as pc
from fuselint.backend.runtime import FusedKernel


def _kernel(fn, device="cuda", dtypes=(torch.bfloat16,), out=torch.bfloat16, more=(), workspace=0, warps=4):
    ir = SimpleNamespace(input_meta=[SimpleNamespace(dtype=d) for d in dtypes])
    kernel = SimpleNamespace(
        device=torch.device(device),
        broken=None,
        ir=ir,
        out_specs=(((4,), (1,), out),),
        workspace=workspace,
        fn=fn,
        grid=(1,),
        consts={"XBLOCK": 64},
        num_warps=warps,
        more=list(more),
    )
    # FusedKernel's own accounts of its launches and their arguments, on this stand-in
    kernel.launches = lambda: FusedKernel.launches(kernel)
    kernel.argument_dtypes = lambda: FusedKernel.argument_dtypes(kernel)
    return kernel


def test_each_distinct_launch_once_in_launch_order_and_cpu_kernels_left_out():
    a, b, c = object(), object(), object()
    kernels = [
        _kernel(a),
        _kernel(a),  # the same function with the same arguments: one compile
        _kernel(a, dtypes=(torch.float32,)),  # another specialization of it
        _kernel(b, device="cpu"),  # interpreted: nothing to compile
        _kernel(c, workspace=8, more=[(b, (2,), {"XBLOCK": 8, "RBLOCK": 16}, 2)]),
    ]
    got = pc.distinct_launches(kernels)
    assert [(fn, dtypes) for fn, dtypes, *_ in got] == [
        (a, (torch.bfloat16, torch.bfloat16)),
        (a, (torch.float32, torch.bfloat16)),
        (c, (torch.bfloat16, torch.bfloat16, torch.float32)),  # the split's workspace is fp32
        (b, (torch.bfloat16, torch.bfloat16, torch.float32)),  # its combine kernel
    ]
    assert got[3][3] == 2 and got[3][4] == {"XBLOCK": 8, "RBLOCK": 16}


def test_broken_kernels_are_not_warmed():
    k = _kernel(object())
    k.broken = "CompilationError"
    assert pc.distinct_launches([k]) == []


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("FUSELINT_COMPILE_THREADS", "0")
    assert pc.threads() == 0
    assert pc.precompile([_kernel(object()), _kernel(object())]) == 0
    monkeypatch.setenv("FUSELINT_COMPILE_THREADS", "six")
    assert pc.threads() == 0
    monkeypatch.delenv("FUSELINT_COMPILE_THREADS")
    assert 1 <= pc.threads() <= 32
