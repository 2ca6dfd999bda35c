"""Time a callable: CUDA events through triton's do_bench on a GPU, perf_counter on a CPU.

Both report the median of many runs after a warm-up, so compilation, caching and
autotuning stay out of the numbers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    median_ms: float
    runs: int
    device: str


def measure(fn: Callable[[], object], device: str, *, warmup_ms: float = 25, rep_ms: float = 100) -> Timing:
    if device.startswith("cuda"):
        from triton.testing import do_bench

        ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
        return Timing(float(ms), -1, torch.cuda.get_device_name())
    for _ in range(3):
        fn()
    times = []
    deadline = time.perf_counter() + rep_ms / 1000
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 1000):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return Timing(statistics.median(times), len(times), "cpu")
