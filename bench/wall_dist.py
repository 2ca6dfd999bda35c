# ruff: noqa: B023, E731  (each lambda is timed within the iteration that made it)
"""Back-to-back calls: per-call host time and GPU-timeline time, fuselint vs Inductor, with and without gc."""

import gc
import statistics
import sys
import time

sys.path.insert(0, "bench")
import models as M
import torch
from triton.testing import do_bench

name = sys.argv[1] if len(sys.argv) > 1 else "mobilenetv3"
model, args = M.build(name)
model, args = M._to(model, args, "cuda", torch.bfloat16)
fs = {}
for be in ("fuselint", "inductor"):
    fs[be] = M.compile_with(be, model)
    with torch.no_grad():
        for _ in range(3):
            fs[be](*args)
torch.cuda.synchronize()


def series(f, n=200):
    hs, ws = [], []
    st = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    with torch.no_grad():
        torch.cuda.synchronize()
        st[0].record()
        for i in range(n):
            t0 = time.perf_counter_ns()
            f(*args)
            hs.append((time.perf_counter_ns() - t0) / 1e3)
            st[i + 1].record()
        torch.cuda.synchronize()
    ws = [st[i].elapsed_time(st[i + 1]) * 1e3 for i in range(n)]
    q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
    return f"host med {statistics.median(hs):.0f} p90 {q(hs, 0.9):.0f} max {max(hs):.0f} | gpu-timeline med {statistics.median(ws):.0f} p90 {q(ws, 0.9):.0f} max {max(ws):.0f}"


for rnd in range(2):
    for be, f in fs.items():
        with torch.no_grad():
            db = do_bench(lambda: f(*args), warmup=25, rep=100, return_mode="median")
            dm = do_bench(lambda: f(*args), warmup=25, rep=100, return_mode="mean")
        print(
            f"{name} {be} r{rnd}: do_bench median {db * 1e3:.0f} mean {dm * 1e3:.0f} us; {series(f)}",
            flush=True,
        )
        gc.disable()
        print(f"{name} {be} r{rnd} gc off: {series(f)}", flush=True)
        gc.enable()
