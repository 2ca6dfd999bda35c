"""Targeted GPU measurements for the backend's open gaps (one call of the GPU tool).

    python3 bench/backend_tune.py --json out.json

1. Launch overhead per compiled call of a one-op graph (x + 1 on 16 elements) in a Python
   loop: eager, Inductor, fuselint with its fast launcher, fuselint through Triton's JIT
   launcher (FUSELINT_FAST_LAUNCH=0's path), and the fuselint call captured in a CUDA graph
   (replay alone, and replay after copying a fresh input into the static one).
2. Launch configurations of the generated kernel for the slow patterns: bf16 cos->sin and
   fp32 RMSNorm at 8192 x 8192, and the ReLU+max-pool window kernel after the conv of the
   benchmark's ConvReluPool (input contiguous and channels_last), plus the conv itself in
   both layouts. The kernel is the one the backend generates; only the config changes.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

from bench.backend import ConvReluPool, launch_overhead_us  # noqa: E402
from fuselint.backend import fuselint_backend, history_mark, reports_since, runtime  # noqa: E402
from fuselint.backend.codegen import generate  # noqa: E402
from fuselint.backend.heuristics import LaunchConfig  # noqa: E402
from fuselint.backend.lowering import TensorMeta  # noqa: E402
from fuselint.backend.runtime import FusedKernel  # noqa: E402


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


class _Recording(FusedKernel):
    def __call__(self, *args):
        self.seen = args
        return super().__call__(*args)


def captured_kernel(fn, args):
    """The single kernel the backend generates for fn, and the arguments it was called with."""
    torch._dynamo.reset()
    start = history_mark()
    with torch.no_grad():
        compiled = torch.compile(fn, backend=fuselint_backend, dynamic=False)
        compiled(*args)
        (k,) = [k for r in reports_since(start) for k in r.kernels]
        k.__class__ = _Recording
        compiled(*args)
    return k, k.seen


def variant(k: FusedKernel, cfg: LaunchConfig, ir=None) -> FusedKernel:
    ir = ir or k.ir
    source, name = generate(ir, cfg)
    return FusedKernel(ir, cfg, source, name, k.fallback)


def sweep(label, k, args, configs, rows, nbytes, ir=None):
    want = k.fallback(*args)  # the group's ATen nodes
    for cfg in configs:
        try:
            v = variant(k, cfg, ir)
            out = v(*args)
            torch.cuda.synchronize()
            assert v.broken is None and v.fallback_calls == 0, v.broken
            err = max((o.float() - w.float()).abs().max().item() for o, w in zip(out, want, strict=True))
            ms = bench(lambda v=v: v(*args))
            rows.append(
                {"case": label, "cfg": cfg.describe(), "ms": ms, "gbps": nbytes / ms / 1e6, "err": err}
            )
            print(
                f"{label:20s} {cfg.describe():66s} {ms:.4f} ms {nbytes / ms / 1e6:5.0f} GB/s err {err:.1e}",
                flush=True,
            )
        except Exception as exc:
            rows.append({"case": label, "cfg": cfg.describe(), "error": repr(exc)[:200]})
            print(label, cfg.describe(), "ERROR", repr(exc)[:200], flush=True)


def graph_overhead(calls: int) -> dict:
    x = torch.randn(16, device="cuda")
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x + 1, backend=fuselint_backend, dynamic=False)
    static = x.clone()
    for _ in range(3):
        fn(static)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(static)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(static)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, static + 1)
    res = {}
    for name, step in (("replay", g.replay), ("copy+replay", lambda: (static.copy_(x), g.replay()))):
        step()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
        res[name] = (time.perf_counter() - t) / calls * 1e6
    return res


def copy_gbps() -> float:
    x = torch.randn(8192 * 8192, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() * 4 / bench(lambda: y.copy_(x)) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip", default="")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    result["copy_gbps"] = copy_gbps()
    print(result, flush=True)

    ov = {}
    for b in ("eager", "inductor", "fuselint"):
        ov[b] = min(launch_overhead_us(b, "cuda", 3000) for _ in range(3))
    runtime.FAST_LAUNCH = False
    ov["fuselint-jit-launch"] = min(launch_overhead_us("fuselint", "cuda", 3000) for _ in range(3))
    runtime.FAST_LAUNCH = True
    try:
        ov.update({f"fuselint cudagraph {k}": v for k, v in graph_overhead(3000).items()})
    except Exception as exc:
        ov["fuselint cudagraph"] = repr(exc)[:200]
    result["launch_overhead_us"] = ov
    print(ov, flush=True)

    rows = []
    if "cos_sin" not in skip:
        xb = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        k, args = captured_kernel(lambda x: torch.sin(torch.cos(x)), [xb])
        n = xb.numel()
        cfgs = [
            LaunchConfig(xb_, 1, True, w, -(-n // xb_)) for xb_ in (512, 1024, 2048, 4096) for w in (2, 4, 8)
        ]
        sweep("cos_sin bf16", k, args, [k.cfg] + cfgs, rows, 2 * n * 2)
        del xb, args
    if "rmsnorm" not in skip:
        xr = torch.randn(8192, 8192, device="cuda")
        w = torch.randn(8192, device="cuda")
        k, args = captured_kernel(
            lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, [xr, w]
        )
        n = xr.numel()
        cfgs = [LaunchConfig(1, 8192, True, wp, 8192) for wp in (4, 8, 16, 32)]
        cfgs += [LaunchConfig(1, rb, False, wp, 8192) for rb in (2048, 4096) for wp in (4, 8, 16)]
        sweep("rmsnorm fp32", k, args, [k.cfg] + cfgs, rows, 2 * n * 4 + 8192 * 4)
        del xr, args
    if "pool" not in skip:
        model = ConvReluPool().cuda().eval()
        xc = torch.randn(64, 32, 56, 56, device="cuda")
        k, args = captured_kernel(model, [xc])
        (conv_out,) = args
        nbytes = conv_out.numel() * 4 + conv_out.numel()  # read conv output, write a quarter
        xo = conv_out.numel() // 4
        cfgs = [
            LaunchConfig(xb_, 1, True, w, -(-xo // xb_)) for xb_ in (256, 512, 1024, 2048) for w in (2, 4, 8)
        ]
        sweep("relu+pool nchw", k, args, [k.cfg] + cfgs, rows, nbytes)
        # The same kernel reading a channels_last conv output (output stays NCHW).
        cl = conv_out.contiguous(memory_format=torch.channels_last)
        ir = copy.deepcopy(k.ir)
        ir.input_meta = (TensorMeta(ir.input_meta[0].shape, cl.stride(), torch.float32),)
        for v in ir.values:
            if v.kind == "window":
                for u in v.window.values:
                    if u.kind == "load":
                        u.strides = cl.stride()
        sweep("relu+pool nhwc-in", k, (cl,), [dataclasses.replace(k.cfg)] + cfgs[3:9], rows, nbytes, ir)
        w_, b_ = model.conv.weight, model.conv.bias
        x_cl = xc.contiguous(memory_format=torch.channels_last)
        w_cl = w_.contiguous(memory_format=torch.channels_last)
        inductor = torch.compile(model)
        with torch.no_grad():
            conv = {
                "conv nchw": bench(lambda: torch.conv2d(xc, w_, b_, padding=1)),
                "conv nhwc (in+w converted outside)": bench(lambda: torch.conv2d(x_cl, w_cl, b_, padding=1)),
                "x to channels_last copy": bench(lambda: xc.contiguous(memory_format=torch.channels_last)),
                "aten relu+max_pool2d": bench(lambda: torch.max_pool2d(torch.relu(conv_out), 2)),
                "inductor whole model": bench(lambda: inductor(xc)),
            }
        result["conv"] = conv
        print(conv, flush=True)
    result["rows"] = rows
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
