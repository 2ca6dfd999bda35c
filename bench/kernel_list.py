"""Which kernels one call of a suite model launches, by name, per backend (torch.profiler).

    PYTHONPATH=. python bench/kernel_list.py llama [--backends fuselint,inductor] [--calls 5]

Prints, per backend, each kernel name with its launches and GPU µs per call, largest first, so
that two backends (or two versions of fuselint, run from two checkouts) can be diffed when their
kernel counts in bench/models.py differ. Inference (bf16 unless --dtype), the models of bench/models.py.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402
import torch  # noqa: E402


def kernel_table(fn, calls: int) -> list[tuple[str, float, float]]:
    """(name, launches per call, GPU µs per call) of every kernel `fn` launches."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    count: dict[str, int] = collections.Counter()
    time_us: dict[str, float] = collections.Counter()
    for ev in prof.events():
        if not M.kernel_event(ev):
            continue
        count[ev.name] += 1
        time_us[ev.name] += ev.device_time
    rows = [(name, count[name] / calls, time_us[name] / calls) for name in count]
    return sorted(rows, key=lambda r: (-r[2], r[0]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--backends", default="fuselint,inductor")
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--dtype", default="bfloat16", help="the models' dtype (bench/models.py's --dtypes)")
    a = p.parse_args(argv)
    model, args = M.build(a.model)
    model, args = M._to(model, args, "cuda", getattr(torch, a.dtype))
    for backend in a.backends.split(","):
        compiled = M.warmed(backend, model, args)
        with torch.no_grad():
            rows = kernel_table(lambda: compiled(*args), a.calls)  # noqa: B023
        total = sum(r[1] for r in rows)
        print(f"== {a.model} {backend}: {total:g} kernels, {sum(r[2] for r in rows):.0f} GPU µs per call")
        for name, n, us in rows:
            print(f"{n:5g} {us:9.1f}  {name[:150]}")
        torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
