"""Benchmark the fuselint backend against eager and Inductor on memory-bound fusion patterns.

    python bench/backend.py --json out.json --md out.md      # on a GPU, ~6-8 minutes
    python bench/backend.py --smoke                          # tiny sizes, CPU interpreter

For each pattern and dtype it times eager, Inductor (default and max-autotune-no-cudagraphs)
and fuselint with ``triton.testing.do_bench`` medians, and prints ms, GB/s of the minimal
bytes (inputs read once, outputs written once), the percentage of the device-to-device copy
bandwidth measured at the start, and fuselint/Inductor. It also records each backend's
first-call (compile) time in this process with the compile caches off, the cold compile
time of a fresh process for two patterns, and the per-call launch overhead of a tiny
compiled graph. One failing pattern or backend is recorded as an error and the run goes
on; a time budget (--budget) skips what would not fit, and the tables print at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


if __name__ == "__main__":  # only a benchmark run changes the environment, not an import
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_env import caches_off

    caches_off()
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BACKENDS = ("eager", "inductor", "inductor-max-autotune", "fuselint")


# -- the pattern suite --------------------------------------------------------------------
def cos_sin(x):
    return torch.sin(torch.cos(x))


def bias_gelu_residual(x, b, r):
    return F.gelu(x + b) + r


def tanh_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def manual_softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def torch_softmax(x):
    return torch.softmax(x, -1)


def manual_layernorm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def manual_rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def silu_mul(a, b):
    return F.silu(a) * b


def residual_layernorm(x, r, w, b):
    h = x + r
    return h, F.layer_norm(h, (x.shape[-1],), w, b)


class ConvReluPool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


# name -> (function, argument kinds); "x"/"r" are (rows, cols), "w"/"b" are (cols,)
MATRIX_PATTERNS = {
    "cos_sin": (cos_sin, "x"),
    "bias_gelu_residual": (bias_gelu_residual, "xbr"),
    "tanh_gelu": (tanh_gelu, "x"),
    "manual_softmax": (manual_softmax, "x"),
    "torch_softmax": (torch_softmax, "x"),
    "manual_layernorm": (manual_layernorm, "xwb"),
    "manual_rmsnorm": (manual_rmsnorm, "xw"),
    "silu_mul": (silu_mul, "xr"),
    "residual_layernorm": (residual_layernorm, "xrwb"),
}


def make_case(name: str, dtype: torch.dtype, device: str, smoke: bool):
    """(callable, args) of a pattern at benchmark size (or smoke size)."""
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen, device=device, dtype=dt)

    if name in MATRIX_PATTERNS:
        fn, kinds = MATRIX_PATTERNS[name]
        rows, cols = (64, 256) if smoke else (8192, 8192)
        shapes = {"x": (rows, cols), "r": (rows, cols), "w": (cols,), "b": (cols,)}
        return fn, [randn(*shapes[k]) for k in kinds]
    if name == "conv_relu_maxpool":
        module = ConvReluPool().to(device=device, dtype=dtype).eval()
        shape = (2, 32, 8, 8) if smoke else (64, 32, 56, 56)
        return module, [randn(*shape)]
    if name == "cos_sin_10k":
        return cos_sin, [randn(10_000)]
    raise KeyError(name)


def cases(smoke: bool) -> list[tuple[str, torch.dtype]]:
    out = [(name, dt) for name in MATRIX_PATTERNS for dt in (torch.float32, torch.bfloat16)]
    out += [("conv_relu_maxpool", dt) for dt in (torch.float32, torch.bfloat16)]
    out += [("cos_sin_10k", torch.float32)]
    return out


def minimal_bytes(fn, args, outputs) -> int:
    """Bytes every implementation must move: each input (and parameter) read, each output written."""
    total = sum(a.numel() * a.element_size() for a in args)
    if isinstance(fn, torch.nn.Module):
        total += sum(p.numel() * p.element_size() for p in fn.parameters())
    return total + sum(o.numel() * o.element_size() for o in _flat(outputs))


def _flat(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


# -- timing ---------------------------------------------------------------------------------
def timer(device: str):
    """median ms of fn(): do_bench on CUDA, a wall-clock loop elsewhere (the interpreter)."""
    if device == "cuda":
        import triton.testing

        return lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")

    def wall(fn, reps: int = 5) -> float:
        fn()
        samples = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t) * 1e3)
        return statistics.median(samples)

    return wall


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def compile_with(backend: str, fn):
    import fuselint.backend as fl

    torch._dynamo.reset()
    if backend == "eager":
        return fn
    if backend == "inductor":
        return torch.compile(fn, dynamic=False)
    if backend == "inductor-max-autotune":
        return torch.compile(fn, dynamic=False, mode="max-autotune-no-cudagraphs")
    if backend == "fuselint":
        return torch.compile(fn, dynamic=False, backend=fl.fuselint_backend)
    raise KeyError(backend)


def copy_bandwidth(device: str, smoke: bool, bench) -> float:
    n = (1 << 16) if smoke else (8192 * 8192)
    x = torch.randn(n, device=device)
    y = torch.empty_like(x)
    ms = bench(lambda: y.copy_(x))
    return 2 * x.numel() * x.element_size() / (ms * 1e-3) / 1e9


def launch_overhead_us(backend: str, device: str, calls: int) -> float:
    """Microseconds per call of a compiled one-op graph on 16 elements, in a Python loop."""
    x = torch.randn(16, device=device)
    fn = compile_with(backend, lambda x: x + 1)
    fn(x)
    fn(x)
    sync(device)
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    sync(device)
    return (time.perf_counter() - t) / calls * 1e6


def measure(name: str, dtype: torch.dtype, backend: str, device: str, smoke: bool, bench) -> dict:
    import fuselint.backend as fl

    row = {"pattern": name, "dtype": str(dtype).removeprefix("torch."), "backend": backend}
    try:
        fn, args = make_case(name, dtype, device, smoke)
        with torch.no_grad():
            want = fn(*args)
            start = fl.history_mark()
            compiled = compile_with(backend, fn)
            sync(device)
            t = time.perf_counter()
            got = compiled(*args)
            sync(device)
            row["compile_s"] = round(time.perf_counter() - t, 3)
            errs = [
                (g.float() - w.float()).abs().max().item()
                for g, w in zip(_flat(got), _flat(want), strict=True)
            ]
            row["max_abs_err"] = max(errs)
            if backend == "fuselint":
                reports = fl.reports_since(start)
                row["kernels"] = sum(1 for r in reports for k in r.kernels if k.calls)
                row["fallbacks"] = [f"{'+'.join(n)[:40]}: {why}" for r in reports for n, why in r.fallbacks][
                    :5
                ]
            ms = bench(lambda: compiled(*args))
        row["ms"] = ms
        row["bytes"] = minimal_bytes(fn, args, want)
        row["gbps"] = row["bytes"] / (ms * 1e-3) / 1e9
    except Exception as exc:  # one failure must not end the run
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        row["traceback"] = traceback.format_exc(limit=4)
        if device == "cuda":
            torch.cuda.empty_cache()
    finally:
        torch._dynamo.reset()
    return row


def cold_compile(backend: str, name: str, dtype: str, smoke: bool, timeout: float) -> dict:
    """First-call time in a fresh process with every compile cache pointed at an empty dir."""
    fresh = tempfile.mkdtemp(prefix="fuselint-cold-")
    env = dict(
        os.environ,
        TORCHINDUCTOR_CACHE_DIR=os.path.join(fresh, "inductor"),
        TRITON_CACHE_DIR=os.path.join(fresh, "triton"),
        FUSELINT_CACHE="0",
    )
    cmd = [sys.executable, __file__, "--cold-one", backend, name, dtype] + (["--smoke"] if smoke else [])
    row = {"pattern": name, "dtype": dtype, "backend": backend}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if out.returncode != 0 or not lines:
            row["error"] = (out.stderr.strip().splitlines() or ["no output"])[-1][:200]
        else:
            row.update(json.loads(lines[-1]))
    except subprocess.TimeoutExpired:
        row["error"] = f"timeout after {timeout:.0f} s"
    return row


def cold_one(backend: str, name: str, dtype_name: str, smoke: bool) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    import fuselint.backend  # noqa: F401  (import cost is not compile cost)

    fn, args = make_case(name, getattr(torch, dtype_name), device, smoke)
    sync(device)
    t = time.perf_counter()
    with torch.no_grad():
        compile_with(backend, fn)(*args)
    sync(device)
    print(json.dumps({"compile_s": round(time.perf_counter() - t, 3)}))


# -- report -----------------------------------------------------------------------------------
def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def markdown(result: dict) -> str:
    rows = result["results"]
    by = {(r["pattern"], r["dtype"], r["backend"]): r for r in rows}
    keys = []
    for r in rows:
        if (r["pattern"], r["dtype"]) not in keys:
            keys.append((r["pattern"], r["dtype"]))
    copy = result["copy_gbps"]
    out = [
        f"Device: {result['device']}; torch {result['torch']}, triton {result['triton']}; "
        f"copy bandwidth {copy:.0f} GB/s. Times are do_bench medians in ms.",
        "",
        "| pattern | dtype | eager | inductor | max-autotune | fuselint | fuselint GB/s | % copy "
        "| fuselint/inductor | kernels | max err |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p, d in keys:
        cell = {b: by.get((p, d, b), {}) for b in BACKENDS}
        ms = {b: cell[b].get("ms") for b in BACKENDS}
        fl = cell["fuselint"]
        ratio = ms["fuselint"] / ms["inductor"] if ms["fuselint"] and ms["inductor"] else None
        pct = 100 * fl["gbps"] / copy if fl.get("gbps") and copy else None

        def show(b, cell=cell, ms=ms):
            return "error" if "error" in cell[b] else ("skipped" if cell[b].get("skipped") else _fmt(ms[b]))

        out.append(
            f"| {p} | {d} | {show('eager')} | {show('inductor')} | {show('inductor-max-autotune')} "
            f"| {show('fuselint')} | {_fmt(fl.get('gbps'), '.0f')} | {_fmt(pct, '.0f')} | {_fmt(ratio, '.2f')} "
            f"| {fl.get('kernels', '-')} | {_fmt(fl.get('max_abs_err'), '.1e')} |"
        )
    out += ["", "First call in this process (compile, caches off), seconds:", ""]
    out += [
        "| pattern | dtype | " + " | ".join(BACKENDS[1:]) + " |",
        "|---|---|" + "---|" * (len(BACKENDS) - 1),
    ]
    for p, d in keys:
        vals = [_fmt(by.get((p, d, b), {}).get("compile_s"), ".2f") for b in BACKENDS[1:]]
        out.append(f"| {p} | {d} | " + " | ".join(vals) + " |")
    if result.get("cold_compile"):
        out += ["", "Cold compile, fresh process, caches off (seconds after imports):", ""]
        out += ["| backend | pattern | dtype | seconds |", "|---|---|---|---|"]
        for r in result["cold_compile"]:
            val = r.get("error") or _fmt(r.get("compile_s"), ".2f")
            out.append(f"| {r['backend']} | {r['pattern']} | {r['dtype']} | {val} |")
    if result.get("launch_overhead_us"):
        out += ["", "Launch overhead per compiled call (tiny graph, Python loop), µs:", ""]
        out += ["| backend | µs/call |", "|---|---|"]
        for b, us in result["launch_overhead_us"].items():
            out.append(f"| {b} | {us if isinstance(us, str) else format(us, '.1f')} |")
    errors = [r for r in rows if "error" in r]
    if errors:
        out += ["", "Errors:", ""]
        out += [f"- {r['pattern']} {r['dtype']} {r['backend']}: {r['error']}" for r in errors]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; on CPU kernels run in the interpreter")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    ap.add_argument("--md", type=Path, help="write the markdown tables here")
    ap.add_argument(
        "--backends", default=None, help="comma list (default: all on CUDA, eager,fuselint on CPU)"
    )
    ap.add_argument("--patterns", default=None, help="comma list of pattern names (default: all)")
    ap.add_argument("--budget", type=float, default=450.0, help="seconds; work past it is skipped")
    ap.add_argument("--no-cold", action="store_true", help="skip the fresh-process compile timings")
    ap.add_argument("--cold-one", nargs=3, metavar=("BACKEND", "PATTERN", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cold_one:
        cold_one(*args.cold_one, smoke=args.smoke)
        return 0

    t0 = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import triton

    import fuselint.backend  # noqa: F401

    backends = (
        args.backends.split(",")
        if args.backends
        else (list(BACKENDS) if device == "cuda" else ["eager", "fuselint"])
    )
    wanted = set(args.patterns.split(",")) if args.patterns else None
    todo = [(p, d) for p, d in cases(args.smoke) if wanted is None or p in wanted]
    bench = timer(device)
    result = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "smoke": args.smoke,
        "copy_gbps": copy_bandwidth(device, args.smoke, bench),
        "results": [],
        "cold_compile": [],
        "launch_overhead_us": {},
    }
    print(f"{result['device']}: copy {result['copy_gbps']:.0f} GB/s", flush=True)

    def over(share: float = 1.0) -> bool:
        return time.perf_counter() - t0 > args.budget * share

    calls = 200 if args.smoke else 2000
    for b in backends:
        try:
            result["launch_overhead_us"][b] = launch_overhead_us(b, device, calls)
        except Exception as exc:
            result["launch_overhead_us"][b] = f"error: {type(exc).__name__}"
    if "fuselint" in backends and device == "cuda":
        # The same call through Triton's JIT launcher (what FUSELINT_FAST_LAUNCH=0 does).
        from fuselint.backend import runtime

        runtime.FAST_LAUNCH = False
        try:
            result["launch_overhead_us"]["fuselint (jit launch)"] = launch_overhead_us(
                "fuselint", device, calls
            )
        except Exception as exc:
            result["launch_overhead_us"]["fuselint (jit launch)"] = f"error: {type(exc).__name__}"
        finally:
            runtime.FAST_LAUNCH = True
    # Most important first, so that a tight budget cuts the least useful numbers: the main
    # comparison, then cold compiles of the default backends, then max-autotune, last its cold compile.
    main_backends = [b for b in backends if b != "inductor-max-autotune"]
    slow_backends = [b for b in backends if b == "inductor-max-autotune"]
    cold_patterns = [("cos_sin", "float32"), ("torch_softmax", "bfloat16")]
    cold_patterns = [(p, d) for p, d in cold_patterns if wanted is None or p in wanted]

    def timings(phase: list[str], share: float) -> None:
        for p, d in todo:
            for b in phase:
                if over(share):
                    row = {
                        "pattern": p,
                        "dtype": str(d).removeprefix("torch."),
                        "backend": b,
                        "skipped": True,
                    }
                else:
                    row = measure(p, d, b, device, args.smoke, bench)
                result["results"].append(row)
                status = row.get("error") or ("skipped" if row.get("skipped") else f"{row['ms']:.4f} ms")
                print(f"{p:20s} {row['dtype']:9s} {b:22s} {status}", flush=True)

    def colds(phase: list[str], share: float) -> None:
        if args.no_cold:
            return
        for p, d in cold_patterns:
            for b in [b for b in phase if b != "eager"]:
                left = args.budget * share - (time.perf_counter() - t0)
                if left < 20:
                    row = {"pattern": p, "dtype": d, "backend": b, "error": "skipped (time budget)"}
                else:
                    row = cold_compile(b, p, d, args.smoke, timeout=min(120.0, left))
                result["cold_compile"].append(row)
                print(f"cold {b:22s} {p:16s} {d:9s} {row.get('error') or row.get('compile_s')}", flush=True)

    timings(main_backends, 0.5)
    colds(main_backends, 0.7)
    timings(slow_backends, 0.9)
    colds(slow_backends, 1.0)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    table = markdown(result)
    print()
    print(table)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    if args.md:
        args.md.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
