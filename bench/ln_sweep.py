"""A LayerNorm's kernel time per launch configuration, fuselint's against Inductor's, on a GPU.

    PYTHONPATH=. python bench/ln_sweep.py [--shapes convnext,rows] [--dtype float32] [--json out.json]

ConvNeXt float32 sits at 1.003x Inductor's wall, and its per-launch profile (bench/results/h200-s23/
launches-convnext32.txt) puts the difference in the LayerNorms that follow its depthwise convolutions:
25088 rows of 192 took 20.4 µs a launch against Inductor's 8.9, where 100352 rows of 96 took 18.8 against
27.6. This compiles that LayerNorm (the convolution's bias add, the channels-last permute, the norm) at
each stage's shape, and plain rows of a transformer's width, with fuselint's backend once per forced
(rows a program, warps) and once with its own choice, and with Inductor; each kernel's GPU time per
launch is the median over `--calls` back-to-back calls (the input in L2, as after the convolution that
writes it) from torch.profiler. Only persistent row reductions are forced; everything else keeps the
backend's choice.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics

import torch
import torch.nn.functional as F

# (name, input shape, channels-last permuted LayerNorm?) -- ConvNeXt-T's four stages at batch 32, and
# the suite's transformer rows (GPT-2 8x512 and BERT 16x256 of 768, LLaMA-sized 4x1024 of 1024).
SHAPES = {
    "convnext": [
        ("cnx-s0", (32, 96, 56, 56), True),
        ("cnx-s1", (32, 192, 28, 28), True),
        ("cnx-s2", (32, 384, 14, 14), True),
        ("cnx-s3", (32, 768, 7, 7), True),
    ],
    "rows": [
        ("rows-4096x768", (4096, 768), False),
        ("rows-4096x1024", (4096, 1024), False),
    ],
}
# Plain rows across widths and counts (each width's padded tile of 128-1024 lanes), for a rule that
# is not one model's: float32, and bf16 for the widths ConvNeXt and T5 have.
SHAPES["grid"] = [
    (f"rows-{rows}x{c}", (rows, c), False)
    for c in (96, 192, 256, 384, 512)
    for rows in (1568, 6272, 25088, 100352)
]
SHAPES["grid16"] = [
    (f"bf16-{rows}x{c}", (rows, c), False) for c in (192, 384, 512) for rows in (6272, 25088, 65536)
]
XBLOCKS = (1, 2, 4, 8, 16)
WARPS = (1, 2, 4, 8)


def norm_of(permuted: bool, channels: int):
    def f(x, bias, weight, beta):
        if permuted:
            v = (x + bias.view(1, -1, 1, 1)).permute(0, 2, 3, 1)
        else:
            v = x + bias
        return F.layer_norm(v, (channels,), weight, beta, 1e-6)

    return f


FORCE: tuple[int, int] | None = None
LAYOUTS = False  # --layouts: each config's TTGIR layouts and its shared-memory traffic
_SEEN: set[int] = set()


def _layouts() -> dict:
    """The blocked layouts, layout conversions and barriers of the kernels compiled since the last call."""
    import sys as _sys

    out = {}
    for name, mod in list(_sys.modules.items()):
        if not name.startswith("fuselint_kernels."):
            continue
        for fn in vars(mod).values():
            caches = getattr(fn, "device_caches", None)
            if not caches:
                continue
            for entry in caches.values():
                cache = next((e for e in entry if isinstance(e, dict)), {})
                for compiled in list(cache.values()):
                    if id(compiled) in _SEEN:
                        continue
                    _SEEN.add(id(compiled))
                    ttgir = getattr(compiled, "asm", {}).get("ttgir", "")
                    out[name] = {
                        "layouts": [ln for ln in ttgir.splitlines() if ln.startswith("#")],
                        "convert_layout": ttgir.count("convert_layout"),
                        "local_alloc": ttgir.count("local_alloc"),
                        "barrier": ttgir.count("barrier"),
                    }
    return out


CHOSEN: list[str] = []


def _install_force() -> None:
    from fuselint.backend import compiler

    choose = compiler.choose_config

    def forced(ir, interpret, max_persistent=None):
        cfg = choose(ir, interpret, max_persistent)
        if FORCE is not None and cfg.rblock > 1 and cfg.persistent and cfg.combine is None and ir.rdims:
            xblock, warps = FORCE
            cfg = dataclasses.replace(cfg, xblock=xblock, num_warps=warps, grid=-(-ir.xnumel // xblock))
        if cfg.rblock > 1:
            CHOSEN.append(cfg.describe())
        return cfg

    compiler.choose_config = forced


def kernel_us(fn, args, calls: int) -> float | None:
    """Median GPU µs per call of the generated kernels (fuselint_* / triton_*)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*args)
        torch.cuda.synchronize()
    times = [
        e.device_time
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name.startswith(("fuselint_", "triton_"))
    ]
    if not times:
        return None
    per_call = len(times) // calls
    if per_call < 1:
        return None
    sums = [sum(times[i * per_call : (i + 1) * per_call]) for i in range(calls)]
    return statistics.median(sums)


def run(shapes: list[str], dtype: torch.dtype, calls: int) -> list[dict]:
    import fuselint.backend  # noqa: F401  (registers the backend)

    global FORCE
    _install_force()
    rows = []
    for group in shapes:
        for name, shape, permuted in SHAPES[group]:
            channels = shape[1] if permuted else shape[-1]
            g = torch.Generator(device="cuda").manual_seed(0)
            kind = torch.bfloat16 if group == "grid16" else dtype
            x = torch.randn(shape, device="cuda", generator=g).to(kind)
            if permuted:
                x = x.contiguous(memory_format=torch.channels_last)
            params = [torch.randn(channels, device="cuda", generator=g).to(kind) for _ in range(3)]
            args = (x, *params)
            f = norm_of(permuted, channels)
            with torch.no_grad():
                ref = f(*args).float()
                results = {}
                for label, force in [("fuselint-default", None)] + [
                    (f"x{xb}-w{w}", (xb, w)) for xb in XBLOCKS for w in WARPS
                ]:
                    rblock = 1 << (channels - 1).bit_length()
                    if force and not (64 <= force[0] * rblock <= 8192 and force[1] * 32 <= force[0] * rblock):
                        continue
                    FORCE = force
                    CHOSEN.clear()
                    torch._dynamo.reset()
                    try:
                        c = torch.compile(f, backend="fuselint", dynamic=False)
                        err = (c(*args).float() - ref).abs().max().item()
                        us = kernel_us(c, args, calls)
                    except Exception as e:  # a config Triton rejects: say so, go on
                        results[label] = {"error": f"{type(e).__name__}: {e}"[:200]}
                        continue
                    results[label] = {
                        "us": us,
                        "err": err,
                        "config": list(CHOSEN),
                        "ttgir": _layouts() if LAYOUTS else None,
                    }
                FORCE = None
                if group.startswith("grid"):
                    results["inductor"] = {"us": float("nan"), "err": None}
                else:
                    torch._dynamo.reset()
                    c = torch.compile(f, backend="inductor", dynamic=False)
                    err = (c(*args).float() - ref).abs().max().item()
                    results["inductor"] = {"us": kernel_us(c, args, calls), "err": err}
            best = min(
                (k for k, v in results.items() if k.startswith("x") and v.get("us")),
                key=lambda k: results[k]["us"],
            )
            rows.append(
                {"name": name, "shape": list(shape), "dtype": str(dtype), "results": results, "best": best}
            )
            d, i, b = results["fuselint-default"], results["inductor"], results[best]
            print(
                f"{name:16s} default {d.get('us', 0):7.2f} µs ({d.get('config')})  inductor {i['us']:7.2f}  "
                f"best {best} {b['us']:7.2f}",
                flush=True,
            )
            top = sorted((v["us"], k) for k, v in results.items() if k.startswith("x") and v.get("us"))
            print("   " + "  ".join(f"{k} {u:.2f}" for u, k in top[:12]), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="convnext,rows")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--json")
    p.add_argument("--layouts", action="store_true")
    a = p.parse_args()
    global LAYOUTS
    LAYOUTS = a.layouts
    rows = run(a.shapes.split(","), getattr(torch, a.dtype), a.calls)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
