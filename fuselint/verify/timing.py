"""Time callables: CUDA events through triton's do_bench on a GPU, perf_counter on a CPU.

On a GPU the callables that are compared are timed in interleaved rounds, the order rotating
each round, and each reports the median of its rounds' do_bench medians. Why: a model whose
host work is the bottleneck runs as fast as the host does, and on an H200 host that speed
jumped 1.7x for seconds at a time (session 25: MobileNetV3's rounds ran at 2.7-3.1 or 5.0-5.6 ms
under one backend). Timed one after the other, one callable can get the slow mode and the
other the fast one; in rounds, both see both. The rounds also run pinned to one CPU (Linux):
pinned, those two modes were gone and the rounds settled within a few percent (session 25's
suite, `bench/gpu_suite.sh --pin`). Only the timing is pinned; compiles keep every CPU.

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

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
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
    """One Timing per callable, in order, timed in the same rounds."""
    if device.startswith("cuda"):
        from triton.testing import do_bench

        def bench(fn: Callable[[], object], warmup: float, rep: float) -> float:
            return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))

        with pinned():
            return gpu_rounds(
                fns, bench, torch.cuda.get_device_name(device), warmup_ms=warmup_ms, rep_ms=rep_ms
            )
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


GPU_ROUNDS = 8


@contextlib.contextmanager
def pinned() -> Iterator[None]:
    """The calling thread on one of its CPUs (the last) while the block runs, then back on all
    of them; nothing where the platform cannot pin (macOS, Windows) or the process may not."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    try:
        cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {max(cpus)})
    except OSError:  # a sandbox that refuses: timed unpinned, not failed
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)


def gpu_rounds(
    fns: Sequence[Callable[[], object]],
    bench: Callable[[Callable[[], object], float, float], float],
    name: str,
    *,
    warmup_ms: float = 25,
    rep_ms: float = 100,
    rounds: int = GPU_ROUNDS,
) -> list[Timing]:
    """`bench(fn, warmup_ms, rep_ms)` (a median in ms) of each callable in `rounds` rounds, the
    first callable of a round rotating; each callable's Timing is the median of its rounds, its
    spread that median over its fastest round. The first round warms up; each round then takes
    a share of `rep_ms`, at least 10 ms."""
    samples: list[list[float]] = [[] for _ in fns]
    share = max(10.0, 2 * rep_ms / rounds)
    for r in range(rounds):
        k = r % len(fns)
        for i in [*range(k, len(fns)), *range(k)]:
            samples[i].append(bench(fns[i], warmup_ms if r == 0 else 5.0, share))
    return [
        Timing(statistics.median(s), rounds, name, statistics.median(s) / min(s) if min(s) > 0 else 1.0)
        for s in samples
    ]


def _cpu_timing(samples: list[float]) -> Timing:
    fastest = min(samples)
    spread = statistics.median(samples) / fastest if fastest > 0 else 1.0
    return Timing(fastest, len(samples), "cpu", spread)
