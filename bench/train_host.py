"""Where a training step's host time goes, per backend: the compiled forward call, the loss,
and the backward, each timed with the GPU kept busy (so a figure is the time to issue the
work, not to run it), then the step's heaviest Python functions under cProfile. For fuselint,
also whether each compiled graph runs through its generated call function.

    python bench/train_host.py [resnet50,gpt2] [--backends fuselint,inductor] [--steps 20]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time

sys.path.insert(0, "bench")
import models as M  # noqa: E402
import torch  # noqa: E402

from fuselint.backend.callgen import GraphRunner  # noqa: E402


def busy_step(compiled, args, sleep_cycles: int) -> tuple[float, float, float]:
    """(forward, loss, backward) µs of host time for one step, queued behind `sleep_cycles`."""
    torch.cuda._sleep(sleep_cycles)
    t0 = time.perf_counter()
    out = M._first_tensor(compiled(*args))
    t1 = time.perf_counter()
    loss = out.float().mean()
    t2 = time.perf_counter()
    loss.backward()
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6, (t2 - t1) * 1e6, (t3 - t2) * 1e6


def profile_step(compiled, args, sleep_cycles: int, top: int) -> str:
    prof = cProfile.Profile()
    torch.cuda._sleep(sleep_cycles)
    prof.enable()
    M._first_tensor(compiled(*args)).float().mean().backward()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


class Timed:
    """A compiled graph's own function, timed per call (host µs)."""

    def __init__(self, fn) -> None:
        self.fn, self.us = fn, []

    def __call__(self, *args):
        t0 = time.perf_counter()
        out = self.fn(*args)
        self.us.append((time.perf_counter() - t0) * 1e6)
        return out


def time_graphs(backend: str) -> list[tuple[str, Timed]]:
    """Wrap each compiled graph's own function (fuselint's generated call functions, Inductor's
    `call`s) in a timer, so a step's host time splits into the graphs and what runs around them
    (dynamo's guards, AOTAutograd's wrappers, the autograd engine)."""
    timed = []
    if backend.startswith("fuselint"):
        for r in (o for o in gc.get_objects() if type(o) is GraphRunner and o.call is not None):
            r.call = Timed(r.call)
            timed.append((r.name, r.call))
    else:
        from torch._inductor.output_code import CompiledFxGraph

        for o in gc.get_objects():
            if type(o) is CompiledFxGraph and getattr(o, "current_callable", None) is not None:
                o.current_callable = Timed(o.current_callable)
                timed.append(("graph", o.current_callable))
    return timed


def runners_report() -> list[str]:
    lines = []
    for r in sorted((o for o in gc.get_objects() if type(o) is GraphRunner), key=lambda o: o.name):
        state = "generated" if r.call is not None else f"FX graph ({r.why_not or 'not yet'})"
        lines.append(f"  graph {r.name}: {state}, {r.calls} FX calls")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="?", default="resnet50,gpt2")
    p.add_argument("--backends", default="fuselint,inductor")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--through-dispatcher",
        action="store_true",
        help="call fuselint's own ops through the dispatcher (as before they were called directly)",
    )
    a = p.parse_args(argv)
    if a.through_dispatcher:
        from fuselint.backend import runtime

        runtime.DIRECT_IMPLS.clear()
    if not torch.cuda.is_available():
        print("bench/train_host.py needs a CUDA GPU", file=sys.stderr)
        return 2
    for name in a.models.split(","):
        for backend in a.backends.split(","):
            torch._dynamo.reset()
            model, args = M.build(name)
            model, args = M._to(model, args, "cuda", torch.bfloat16)
            model.train()
            compiled = M.compile_with(backend, model)
            for _ in range(3):
                M._first_tensor(compiled(*args)).float().mean().backward()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            M._first_tensor(compiled(*args)).float().mean().backward()
            torch.cuda.synchronize()
            step_us = (time.perf_counter() - t0) * 1e6
            sleep = int(2_000_000 * 2 * step_us / 1000)  # ~2x the step's time of GPU work ahead
            if backend.startswith("fuselint"):
                print("\n".join(runners_report()))
            timed = time_graphs(backend)
            parts = [busy_step(compiled, args, sleep) for _ in range(a.steps)]
            fwd, loss, bwd = (statistics.median(x) for x in zip(*parts, strict=True))
            print(
                f"{name} {backend}: forward {fwd:.0f} µs, loss {loss:.0f} µs, backward {bwd:.0f} µs "
                f"(host, GPU busy; median of {a.steps} steps; one synchronised step {step_us:.0f} µs)"
            )
            for label, t in timed:
                if t.us:
                    print(
                        f"  {label} graph's own function: {statistics.median(t.us):.0f} µs per call, {len(t.us)} calls"
                    )
            print(profile_step(compiled, args, sleep, a.top), flush=True)
            del compiled, model, args
            gc.collect()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
