"""Host time per call, split at the compiled graph: what the backend's runtime spends (the graph's
own callable: fuselint's GraphRunner, Inductor's CompiledFxGraph) and what the layers around it
spend (dynamo's guards and frame, AOTAutograd's wrappers), per kernel launched. On a GPU.

    python bench/runtime_host.py [--models gpt2,llama,bert,t5enc,resnet50] [--dtype bfloat16]

Issue 12 part 2 asks for a host cost per kernel at or below Inductor's. bench/models.py's host µs per
call over kernels per call counts, per kernel, the layers both backends share (the guards, the
wrappers, the extern ops' own dispatch), so a backend that launches fewer kernels pays more per
kernel for the same fixed work (session 25: five rows of eighteen 1-6% above Inductor's, every row's
host per call 0.58-0.99x). Here the graph callable's own time is measured too, by wrapping the
runtime's call method (torch's `CompiledFxGraph.__call__` is internal: a row whose wrapper saw no
call says so instead of a number).

Per model: every backend compiled, then `--rounds` rounds, the order rotating, each timing `--calls`
calls with bench/models.py's host_us (each issued behind queued GPU work; the clock's own reset
adds well under a µs), on one CPU (the last). Medians over rounds. Then torch.profiler counts the
kernels per call, split into Triton kernels (either backend's generated ones and fuselint's hand-written
ones) and the rest (cuBLAS, cuDNN, attention, ATen's own); and the rounds run once more ("after a
profile"), since a profiler session may leave its launch callbacks behind.

A real model's average over kernels mixes two kinds of launch that cost the host differently: a
Triton launch, and an ATen op (a matmul, a convolution) whose library launches the kernel. A backend
that fuses more Triton kernels away keeps the same ATen ops, so its average rises while every launch
costs the same. Two synthetic graphs of one kind each price the launches apart (`--models` names):

  pointwise  sin of 24 separate 64x1024 inputs: 24 Triton kernels in either backend, nothing else
  mms        24 bias-free 1024x1024 Linear layers on 64 rows: 24 ATen matmuls, nothing else
  convs      24 bias-free 3x3 convolutions of 64 channels on 8x64x28x28: 24 ATen convolutions (cuDNN
             picks the kernels, the same ones under either backend), nothing else
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import models as M  # noqa: E402
import torch  # noqa: E402

from fuselint.verify.timing import pinned  # noqa: E402


class InnerClock:
    """Time spent inside a class's `__call__` (the graph's runtime), summed over calls."""

    def __init__(self, cls: type) -> None:
        self.cls, self.seconds, self.calls = cls, 0.0, 0
        self._original = cls.__call__
        clock = self

        def timed(obj, *args, **kwargs):
            start = time.perf_counter()
            try:
                return clock._original(obj, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - start
                clock.calls += 1

        cls.__call__ = timed

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def close(self) -> None:
        self.cls.__call__ = self._original


def _inner_classes() -> dict[str, type]:
    from fuselint.backend.callgen import GraphRunner

    classes = {"fuselint": GraphRunner}
    try:
        from torch._inductor.output_code import CompiledFxGraph

        classes["inductor"] = CompiledFxGraph
    except ImportError:  # another torch: the inductor row gives its whole host time only
        pass
    return classes


def _host_round(call, clock: InnerClock | None, calls: int) -> tuple[float, float | None]:
    """(host µs per call, bench/models.py's host_us, and µs per call inside the graph callable or
    None) over `calls` calls."""
    inner = []

    def timed():
        if clock is not None:
            clock.reset()
        call()
        if clock is not None and clock.calls:
            inner.append(clock.seconds)

    host = M.host_us(timed, calls=calls)
    return host, statistics.median(inner) * 1e6 if inner else None


class _Pointwise(torch.nn.Module):
    """`pointwise`: sin of each of 24 inputs, each its own output: no two share a read or feed
    each other, so neither backend fuses them (one Triton kernel each, one input and one output)."""

    def forward(self, *xs: torch.Tensor) -> tuple:
        return tuple(torch.sin(x) for x in xs)


def _chain(layer, depth: int = 24) -> torch.nn.Module:
    """`depth` layers made by `layer()`, one after the other: `mms` (bias-free Linear layers, one
    ATen matmul each) and `convs` (bias-free 3x3 convolutions, one ATen convolution each)."""
    return torch.nn.Sequential(*(layer() for _ in range(depth)))


SYNTHETIC = ("pointwise", "mms", "convs")


def build(name: str) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    if name == "pointwise":
        return _Pointwise().eval(), tuple(torch.randn(64, 1024) for _ in range(24))
    if name == "mms":
        return _chain(lambda: torch.nn.Linear(1024, 1024, bias=False)).eval(), (torch.randn(64, 1024),)
    if name == "convs":
        conv = _chain(lambda: torch.nn.Conv2d(64, 64, 3, padding=1, bias=False))
        return conv.eval(), (torch.randn(8, 64, 28, 28),)
    return M.build(name)


# Triton kernels by name: Inductor's generated ones, fuselint's generated and hand-written ones.
_TRITON_PREFIXES = ("triton_", "fuselint_")
_HAND_WRITTEN = frozenset({"_add_rows", "_pool_with_indices", "_gather_grads"})


def is_triton_kernel(name: str) -> bool:
    return name.startswith(_TRITON_PREFIXES) or name in _HAND_WRITTEN


def kernel_kinds(call, calls: int = 5) -> tuple[float, float]:
    """(Triton kernels, other kernels) per call, from torch.profiler."""
    names = [ev.name for ev in M.profiled_events(call, calls) if M.kernel_event(ev)]
    triton = sum(1 for name in names if is_triton_kernel(name))
    return triton / calls, (len(names) - triton) / calls


def _time_rounds(prepared: dict, clocks: dict, rounds: int, calls: int) -> tuple[dict, dict]:
    """Host and in-callable µs per call, the median of `rounds` rotating rounds, per backend."""
    backends = list(prepared)
    hosts: dict[str, list[float]] = {b: [] for b in backends}
    inners: dict[str, list[float]] = {b: [] for b in backends}
    with pinned():  # verify's own pinning: the timing thread on the last CPU
        for r in range(rounds):
            k = r % len(backends)
            for b in backends[k:] + backends[:k]:
                host, inner = _host_round(prepared[b], clocks.get(b), calls)
                hosts[b].append(host)
                if inner is not None:
                    inners[b].append(inner)
    return (
        {b: statistics.median(v) for b, v in hosts.items()},
        {b: statistics.median(v) if v else None for b, v in inners.items()},
    )


def measure(name: str, backends: list[str], dtype: torch.dtype, rounds: int, calls: int) -> list[dict]:
    import fuselint.backend  # noqa: F401  (registers the backend)

    torch._dynamo.reset()
    prepared = {}
    for backend in backends:
        model, args = M._to(*build(name), "cuda", dtype)
        compiled = M.compile_with(backend, model)

        def call(compiled=compiled, args=args):
            with torch.no_grad():
                return compiled(*args)

        for _ in range(3):
            call()
        prepared[backend] = call
    classes = _inner_classes()
    clocks = {b: InnerClock(classes[b]) for b in backends if b in classes}
    try:
        hosts, inners = _time_rounds(prepared, clocks, rounds, calls)
        kinds = {b: kernel_kinds(prepared[b]) for b in backends}  # after the timing: see the docstring
        after, _ = _time_rounds(prepared, clocks, max(2, rounds // 2), calls)
    finally:
        for clock in clocks.values():
            clock.close()
    rows = []
    for b in backends:
        triton, other = kinds[b]
        kernels = triton + other
        host, inner = hosts[b], inners[b]
        rows.append(
            {
                "model": name,
                "backend": b,
                "kernels": kernels,
                "triton": triton,
                "other": other,
                "host_us": host,
                "inner_us": inner,
                "host_after_profile_us": after[b],
                "host_per_kernel": host / kernels,
                "inner_per_kernel": inner / kernels if inner is not None else None,
            }
        )
    torch._dynamo.reset()
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,llama,bert,t5enc,resnet50")
    p.add_argument("--backends", default="fuselint,inductor")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--calls", type=int, default=10)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("runtime_host: needs a CUDA GPU")
    dtype = getattr(torch, a.dtype)
    backends = [b for b in a.backends.split(",") if b]
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {a.dtype}; µs per call, medians of {a.rounds} rounds"
    )
    print(
        "| model | backend | kernels (Triton + other) | host µs | in the graph callable µs | around it µs"
        " | host / kernel | graph callable / kernel | host after a profile µs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in [m for m in a.models.split(",") if m]:
        try:
            rows = measure(name, backends, dtype, a.rounds, a.calls)
        except Exception as exc:  # noqa: BLE001 - one model failing keeps the others
            print(f"| {name} | error: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} ||||||||")
            continue
        for r in rows:
            print(row_text(r), flush=True)


def row_text(r: dict) -> str:
    inner = "no call seen" if r["inner_us"] is None else f"{r['inner_us']:.0f}"
    around = "–" if r["inner_us"] is None else f"{r['host_us'] - r['inner_us']:.0f}"
    per = "–" if r["inner_per_kernel"] is None else f"{r['inner_per_kernel']:.1f}"
    return (
        f"| {r['model']} | {r['backend']} | {r['kernels']:.0f} ({r['triton']:.0f} + {r['other']:.0f})"
        f" | {r['host_us']:.0f} | {inner} | {around} | {r['host_per_kernel']:.1f} | {per}"
        f" | {r['host_after_profile_us']:.0f} |"
    )


if __name__ == "__main__":
    main()
