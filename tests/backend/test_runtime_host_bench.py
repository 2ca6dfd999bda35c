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
