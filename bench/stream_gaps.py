"""Where a call's wall time goes on the GPU's stream: kernel time vs idle gaps, per backend.

    PYTHONPATH=. python bench/stream_gaps.py convnext --dtype float32 [--backends fuselint,inductor]

`bench/models.py` times a call as triton's `do_bench` does: clear the L2 cache (a 256 MB fill), then
the call, between two CUDA events. Where the host keeps ahead of the GPU, that wall is the kernels'
time plus the stream's idle time between them. This runs the same sequence under torch.profiler,
with a short spin kernel after each cache fill as the separator between calls, and prints per
backend the median over calls of:
- `span`: first kernel's start to last kernel's end;
- `busy`: the union of the call's kernels, memsets and copies on the GPU;
- `idle`: span - busy, and `lead`: the separator's end to the call's first kernel (the host's time
  before its first launch that the cache fill did not hide);
- the largest idle gaps, by the kernels before and after them (µs per call);
- with `--launches`, every kernel by name and grid: launches per call and median µs per launch (a
  kernel run at several shapes, a LayerNorm per stage, shows once per shape).
A backend whose wall is above another's while its kernels' time is not shows here where its
stream waits.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402
import torch  # noqa: E402

SPIN = "spin_kernel"  # torch.cuda._sleep's kernel
GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")


def split_calls(events: list[dict]) -> list[tuple[float, list[dict]]]:
    """The GPU events between separators: (separator's end, the call's events by start)."""
    events = sorted(events, key=lambda e: (e["ts"], e["name"]))
    calls: list[tuple[float, list[dict]]] = []
    current: list[dict] | None = None
    for ev in events:
        if SPIN in ev["name"]:
            current = []
            calls.append((ev["ts"] + ev["dur"], current))
        elif current is not None and "FillFunctor" not in ev["name"]:
            current.append(ev)
    return [(end, evs) for end, evs in calls if evs]


def call_stats(sep_end: float, evs: list[dict]) -> dict:
    """span, busy, idle and lead of one call, and its idle gaps keyed by (before, after)."""
    start = evs[0]["ts"]
    busy, reach = 0.0, start
    gaps: dict[tuple[str, str], float] = collections.Counter()
    prev = ""
    for ev in evs:
        end = ev["ts"] + ev["dur"]
        if ev["ts"] > reach:
            gaps[(prev, ev["name"])] += ev["ts"] - reach
        busy += max(0.0, end - max(ev["ts"], reach))
        if end > reach:
            reach, prev = end, ev["name"]
    span = reach - start
    return {"span": span, "busy": busy, "idle": span - busy, "lead": start - sep_end, "gaps": gaps}


def summarize(calls: list[dict], top: int) -> dict:
    out = {k: statistics.median(c[k] for c in calls) for k in ("span", "busy", "idle", "lead")}
    total: dict[tuple[str, str], float] = collections.Counter()
    for c in calls:
        total.update(c["gaps"])
    out["gaps"] = sorted(((v / len(calls), k) for k, v in total.items()), key=lambda t: (-t[0], t[1]))[:top]
    out["calls"] = len(calls)
    return out


def launches(calls: list[tuple[float, list[dict]]]) -> list[tuple[str, str, float, float]]:
    """(name, grid, launches per call, median µs per launch) of the calls' kernels, largest total first."""
    durations: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for _, evs in calls:
        for ev in evs:
            if ev.get("cat") == "kernel":
                grid = "x".join(str(g) for g in ev.get("args", {}).get("grid", []))
                durations[(ev["name"], grid)].append(ev["dur"])
    rows = [(n, g, len(d) / len(calls), statistics.median(d)) for (n, g), d in durations.items()]
    return sorted(rows, key=lambda r: (-r[2] * r[3], r[0], r[1]))


def profile_calls(fn, calls: int) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            cache.zero_()
            torch.cuda._sleep(20_000)
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return [e for e in trace.get("traceEvents", []) if e.get("cat") in GPU_CATEGORIES and "dur" in e]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--backends", default="fuselint,inductor")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--launches", action="store_true", help="also list every kernel by name and grid")
    a = p.parse_args(argv)
    model, args = M.build(a.model)
    model, args = M._to(model, args, "cuda", getattr(torch, a.dtype))
    for backend in a.backends.split(","):
        compiled = M.warmed(backend, model, args)
        with torch.no_grad():
            events = profile_calls(lambda: compiled(*args), a.calls)  # noqa: B023
        calls = split_calls(events)
        s = summarize([call_stats(end, evs) for end, evs in calls], a.top)
        print(
            f"== {a.model} {a.dtype} {backend}: {s['calls']} calls; median span {s['span']:.1f} µs, "
            f"busy {s['busy']:.1f}, idle {s['idle']:.1f}, lead {s['lead']:.1f}"
        )
        for us, (before, after) in s["gaps"]:
            print(f"  {us:8.2f} µs  {before[:70]}  ->  {after[:70]}")
        if a.launches:
            for name, grid, n, us in launches(calls):
                print(f"  {n:5g} x {us:8.2f} µs  grid {grid:>14}  {name[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
