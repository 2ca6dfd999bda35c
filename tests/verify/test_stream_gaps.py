"""bench/stream_gaps.py: a call's kernels, idle gaps and lead split from a made-up trace (no GPU)."""

from __future__ import annotations

import pytest
from bench_loader import bench_module


@pytest.fixture(scope="module")
def gaps():
    return bench_module("stream_gaps")


def _ev(name: str, ts: float, dur: float) -> dict:
    return {"name": name, "ts": ts, "dur": dur, "cat": "kernel"}


def _trace() -> list[dict]:
    """Two calls, each after a cache fill and a spin; the second call idles 5 µs between b and c."""
    return [
        _ev("vectorized_elementwise_kernel<FillFunctor<int>>", 0, 80),
        _ev("spin_kernel", 80, 20),
        _ev("a", 103, 10),
        _ev("b", 114, 6),
        _ev("vectorized_elementwise_kernel<FillFunctor<int>>", 130, 80),
        _ev("spin_kernel", 210, 20),
        _ev("a", 231, 10),
        _ev("b", 241, 6),
        _ev("c", 252, 4),
    ]


def test_calls_are_split_at_the_spin_and_the_fill_is_left_out(gaps):
    calls = gaps.split_calls(list(reversed(_trace())))
    assert [end for end, _ in calls] == [100, 230]
    assert [[e["name"] for e in evs] for _, evs in calls] == [["a", "b"], ["a", "b", "c"]]


def test_idle_gaps_are_keyed_by_their_neighbours_and_overlaps_are_counted_once(gaps):
    (end1, first), (end2, second) = gaps.split_calls(_trace())
    s1 = gaps.call_stats(end1, first)
    assert (s1["span"], s1["busy"], s1["idle"], s1["lead"]) == (17, 16, 1, 3)
    s2 = gaps.call_stats(end2, second)
    assert (s2["span"], s2["busy"], s2["idle"], s2["lead"]) == (25, 20, 5, 1)
    assert s2["gaps"] == {("b", "c"): 5}
    overlapping = gaps.call_stats(0, [_ev("x", 0, 10), _ev("y", 5, 10), _ev("z", 20, 1)])
    assert (overlapping["span"], overlapping["busy"], overlapping["idle"]) == (21, 16, 5)
    assert overlapping["gaps"] == {("y", "z"): 5}


def test_summary_takes_medians_and_averages_the_gaps_over_calls(gaps):
    stats = [gaps.call_stats(end, evs) for end, evs in gaps.split_calls(_trace())]
    s = gaps.summarize(stats, top=5)
    assert s["calls"] == 2
    assert s["span"] == 21 and s["idle"] == 3
    assert s["gaps"] == [(2.5, ("b", "c")), (0.5, ("a", "b"))]


def test_launches_are_listed_per_name_and_grid(gaps):
    trace = _trace()
    trace[2]["args"] = {"grid": [4, 1, 1]}
    trace[6]["args"] = {"grid": [8, 1, 1]}
    rows = gaps.launches(gaps.split_calls(trace))
    assert rows[0] == ("b", "", 1.0, 6.0)
    assert ("a", "4x1x1", 0.5, 10.0) in rows and ("a", "8x1x1", 0.5, 10.0) in rows
    assert ("c", "", 0.5, 4.0) in rows
