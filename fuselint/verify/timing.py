"""Time callables: CUDA events through triton's do_bench on a GPU, perf_counter on a CPU.

On a GPU each callable gets the median of many runs after a warm-up.

On a CPU the callables that are compared are timed together, in interleaved rounds, and
each reports its fastest run. Why: a CPU shared with other work (a CI runner, a laptop, a
box of 2 cores with torch's intra-op pool at 2 threads) makes every parallel ATen op wait
at a barrier until the pool's other thread is scheduled again. Calls then take either the
model's own time or 10-100x that, in bursts that come and go over seconds. Timed one after
the other, two identical models measured 1.5 ms against 28 ms medians; interleaved, both
see the same bursts, and the fastest run (what timeit advises for the same reason) is the
cost of the code itself: identical models agree within a few percent. `spread` (median over
fastest) says how disturbed the machine was.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    ms: float  # the median on a GPU, the fastest run on a CPU
    runs: int
    device: str
    spread: float = 1.0  # median / fastest run; 1.0 when not known


def measure(fn: Callable[[], object], device: str, *, warmup_ms: float = 25, rep_ms: float = 100) -> Timing:
    return measure_together([fn], device, warmup_ms=warmup_ms, rep_ms=rep_ms)[0]


def measure_together(
    fns: Sequence[Callable[[], object]],
    device: str,
    *,
    warmup_ms: float = 25,
    rep_ms: float = 100,
    min_rounds: int = 20,
    max_rounds: int = 1000,
) -> list[Timing]:
    """One Timing per callable, in order; on a CPU they are timed in the same rounds."""
    if device.startswith("cuda"):
        from triton.testing import do_bench

        name = torch.cuda.get_device_name()
        return [
            Timing(float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")), -1, name)
            for fn in fns
        ]
    for fn in fns:
        for _ in range(3):
            fn()
    samples: list[list[float]] = [[] for _ in fns]
    deadline = time.perf_counter() + rep_ms * len(fns) / 1000
    rounds = 0
    while rounds < min_rounds or (time.perf_counter() < deadline and rounds < max_rounds):
        # Alternate the order, so that no callable always runs first in a round.
        order = range(len(fns)) if rounds % 2 == 0 else range(len(fns) - 1, -1, -1)
        for i in order:
            start = time.perf_counter()
            fns[i]()
            samples[i].append((time.perf_counter() - start) * 1000)
        rounds += 1
    return [_cpu_timing(s) for s in samples]


def _cpu_timing(samples: list[float]) -> Timing:
    fastest = min(samples)
    spread = statistics.median(samples) / fastest if fastest > 0 else 1.0
    return Timing(fastest, len(samples), "cpu", spread)
