"""bench/runtime_host.py's clock: the time spent inside a graph runtime's call, summed over the
graph calls of one model call, and the class given back as it was."""

from __future__ import annotations

import time

from bench_loader import bench_module


class Runtime:
    def __call__(self, seconds: float) -> str:
        time.sleep(seconds)
        return "ran"


def test_the_clock_sums_the_calls_inside_and_puts_the_method_back():
    rh = bench_module("runtime_host")
    original = Runtime.__call__
    clock = rh.InnerClock(Runtime)
    try:
        graph = Runtime()
        start = time.perf_counter()
        assert graph(0.01) == "ran" and graph(0.02) == "ran"  # two graphs of one model call
        outside = time.perf_counter() - start
        assert clock.calls == 2 and 0.03 <= clock.seconds <= outside
        clock.reset()
        assert (clock.calls, clock.seconds) == (0, 0.0)
    finally:
        clock.close()
    assert Runtime.__call__ is original


def test_the_graph_callables_are_fuselint_s_runner_and_inductor_s_compiled_graph():
    rh = bench_module("runtime_host")
    from fuselint.backend.callgen import GraphRunner

    classes = rh._inner_classes()
    assert classes["fuselint"] is GraphRunner
    assert classes["inductor"].__name__ == "CompiledFxGraph"


def test_kernels_are_sorted_into_triton_launches_and_library_ones():
    rh = bench_module("runtime_host")
    triton = ["triton_poi_fused_add_0", "triton_red_fused_sum_1", "fuselint_add_mul", "_pool_with_indices"]
    other = ["sm90_xmma_gemm_bf16bf16_bf16f32", "cutlass_80_wmma_tensorop", "flash_fwd_kernel", "_add_rows_x"]
    assert [rh.is_triton_kernel(n) for n in triton] == [True] * 4
    assert [rh.is_triton_kernel(n) for n in other] == [False] * 4


def test_the_synthetic_graphs_hold_one_kind_of_launch_each():
    import torch

    rh = bench_module("runtime_host")
    pointwise, xs = rh.build("pointwise")
    mms, (y,) = rh.build("mms")
    assert len(xs) == 24 and all(x.shape == (64, 1024) for x in xs) and y.shape == (64, 1024)
    assert all(torch.equal(out, torch.sin(x)) for out, x in zip(pointwise(*xs), xs, strict=True))
    gm = torch.fx.symbolic_trace(mms)
    called = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert len(called) == 24 and all(isinstance(mms.get_submodule(t), torch.nn.Linear) for t in called)
    assert all(mms.get_submodule(t).bias is None for t in called)
    convs, (z,) = rh.build("convs")
    gm = torch.fx.symbolic_trace(convs)
    called = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert len(called) == 24 and z.shape == (8, 64, 28, 28)
    layers = [convs.get_submodule(t) for t in called]
    assert all(isinstance(c, torch.nn.Conv2d) and c.bias is None and c.groups == 1 for c in layers)
    assert convs(z).shape == z.shape  # each convolution keeps the shape: the next takes it as it is


def test_a_row_reads_the_launch_kinds_and_says_when_no_call_was_seen():
    rh = bench_module("runtime_host")
    row = {
        "model": "gpt2",
        "backend": "inductor",
        "kernels": 45.0,
        "triton": 21.0,
        "other": 24.0,
        "host_us": 1286.0,
        "inner_us": None,
        "host_after_profile_us": 2300.0,
        "host_per_kernel": 1286.0 / 45,
        "inner_per_kernel": None,
    }
    assert (
        rh.row_text(row) == "| gpt2 | inductor | 45 (21 + 24) | 1286 | no call seen | – | 28.6 | – | 2300 |"
    )
    row.update(inner_us=1100.0, inner_per_kernel=1100.0 / 45)
    assert "| 1286 | 1100 | 186 | 28.6 | 24.4 | 2300 |" in rh.row_text(row)


def test_the_kinds_are_counted_per_call_from_the_profile_s_gpu_kernels(monkeypatch):
    import types

    import torch

    rh = bench_module("runtime_host")
    gpu, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    events = [
        types.SimpleNamespace(name=name, device_type=kind)
        for name, kind in [
            ("triton_poi_fused_add_0", gpu),
            ("sm90_xmma_gemm", gpu),
            ("Memcpy HtoD", gpu),  # a copy, not a kernel
            ("triton_poi_fused_add_0", cpu),  # its launch on the host
            ("fuselint_mul", gpu),
            ("flash_fwd_kernel", gpu),
        ]
    ]
    monkeypatch.setattr(rh.M, "profiled_events", lambda call, calls: events)
    assert rh.kernel_kinds(lambda: None, calls=2) == (1.0, 1.0)
