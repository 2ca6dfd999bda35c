"""bench/tf32_errors.py: the per-batch comparison against Inductor (no GPU)."""

from __future__ import annotations

from bench_loader import bench_module


def _module():
    return bench_module("tf32_errors")


def test_above_counts_batches_where_a_backend_is_above_inductor():
    tf32 = _module()
    means = {"eager": [1.0, 2.0, 3.0], "fuselint": [0.5, 2.5, 3.0], "inductor": [0.9, 2.0, 3.5]}
    assert tf32.above_counts(means) == {"eager": 1, "fuselint": 1}
    assert tf32.above_counts({"eager": [1.0]}) == {}
