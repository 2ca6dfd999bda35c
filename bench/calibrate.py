"""Measure a GPU for the cost model and write its device table (what `check --target FILE` reads).

Runs on the GPU itself (`python bench/calibrate.py --out bench/results/device-h100.json`):
- bandwidth: a device-to-device copy of 1 GiB, bytes read + written per second (median of
  `triton.testing.do_bench`);
- launch cost: the GPU kernel time of a tiny op (one-element add), median over 2,000 of them as
  torch.profiler reports each kernel: what the cost model adds per kernel, since it prices
  summed GPU kernel time (bench/predict_accuracy.py compares with exactly that). The time
  between CUDA events around a Python loop of launches measures the host instead (8.08 µs per
  op on an H100, where the kernel itself takes ~1.2 µs): printed beside it, not used;
- matmul rates: a square bf16 and fp32 matmul (8192; TF32 off, as PyTorch's default), in dense
  TFLOP/s;
- with --curves FILE, also the time of each matmul shape of bench/models.py's suite and of an
  elementwise add from 1 to 256 MB moved (the rates kernels reach at the sizes models run,
  which the two numbers above overstate; not yet read by the cost model).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

try:
    from triton.testing import do_bench
except ImportError:  # the CPU machines: curves() with a timer of its own (tests)
    do_bench = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fuselint.fusion.devices import Device, device_to_json  # noqa: E402


def copy_bandwidth_gbs() -> float:
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def launch_us(ops: int = 2000) -> float:
    """Median GPU time of a tiny kernel, as torch.profiler times each kernel."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(1, device="cuda")
    for _ in range(100):  # warm up
        x.add_(1)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(ops):
            x.add_(1)
        torch.cuda.synchronize()
    # as bench/models.py's gpu_profile reads kernel times, so both sides count the same thing
    times = [
        e.device_time if hasattr(e, "device_time") else e.cuda_time
        for e in prof.events()
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
        and "elementwise" in e.name.lower()
    ]
    if len(times) < ops // 2:
        raise RuntimeError(f"the profiler saw {len(times)} of {ops} kernels")
    return statistics.median(times)


def host_launch_us(ops: int = 2000, repeats: int = 7) -> float:
    """Time per op between CUDA events around a Python loop of launches: bound by the host."""
    x = torch.zeros(1, device="cuda")
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(ops):
            x.add_(1)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / ops)
    return statistics.median(times)


def matmul_tflops(dtype: torch.dtype, n: int = 8192) -> float:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    ms = do_bench(lambda: a @ b, warmup=25, rep=200, return_mode="median")
    return 2 * n**3 / (ms * 1e-3) / 1e12


# The suite's shapes (bench/models.py, bf16): the matmuls of its transformers as (M, N, K), and
# elementwise sizes from 1 to 256 MB, so that a later cost model can price kernels at the sizes
# the models run instead of at the 8192^3 GEMM's and 1 GiB copy's rates.
SUITE_MATMULS = (
    (4096, 512, 512), (4096, 2048, 512), (4096, 512, 2048),  # T5 encoder
    (4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072),  # GPT-2, BERT
    (4096, 1024, 1024), (4096, 2816, 1024), (4096, 1024, 2816),  # LLaMA
    (6304, 2304, 768), (6304, 3072, 768), (6304, 768, 3072),  # ViT-B/16, 32 images
    (100352, 384, 96), (100352, 96, 384),  # ConvNeXt-T's first-stage MLP
)  # fmt: skip
ELEMENTWISE_MB = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def curves(device: str = "cuda", dtype: torch.dtype = torch.bfloat16, timer=None) -> dict:
    """Measured time of the suite's matmul shapes and of an elementwise add over a range of
    sizes: {"matmul": [[M, N, K, µs, TFLOP/s]], "elementwise": [[MB moved, µs, GB/s]]}.
    timer(fn) -> ms per call (default: triton's do_bench median)."""
    timer = timer or (lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median"))
    out: dict = {"matmul": [], "elementwise": []}
    for m, n, k in SUITE_MATMULS:
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        us = timer(lambda a=a, b=b: a @ b) * 1e3
        out["matmul"].append([m, n, k, round(us, 2), round(2 * m * n * k / us / 1e6, 1)])
    for mb in ELEMENTWISE_MB:
        x = torch.empty(mb * (1 << 20) // 2 // _element_size(dtype), device=device, dtype=dtype).fill_(1)
        us = timer(lambda x=x: x.add(1)) * 1e3
        moved = 2 * x.numel() * _element_size(dtype)  # read + written
        out["elementwise"].append([round(moved / 1e6, 2), round(us, 2), round(moved / us / 1e3, 1)])
    return out


def cuda_events(fn, calls: int = 10) -> list:
    """The GPU events (kernels, memsets) of `calls` calls of `fn` after 3 warm-up calls (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]


def kernel_ms(fn, calls: int = 10) -> float:
    """Summed GPU kernel time of one call of `fn` (torch.profiler, mean over `calls`), in ms."""
    kernels = cuda_events(fn, calls)
    total = sum(e.device_time if hasattr(e, "device_time") else e.cuda_time for e in kernels)
    return total / calls / 1e3


# The efficiency sweep: a grid over the shapes real models run, not the suite's own shapes, so
# that the cost model interpolates rates for any model (`Device.efficiency`).
GEMM_M = (256, 1024, 4096, 16384, 65536)
GEMM_NK = (64, 128, 256, 512, 1024, 2048, 4096)
CONV_HW = (112, 56, 28, 14, 7)
CONV_C = (16, 32, 64, 128, 256, 512, 1024)
CONV_BATCH = 32
BANDWIDTH_BYTES = tuple(1 << s for s in range(16, 31, 2))  # 64 KiB to 1 GiB moved


def efficiency(dtype: torch.dtype = torch.bfloat16, timer=None, device: str = "cuda") -> dict:
    """What kernels reach at the sizes models run, measured on this GPU:
    - "gemm": [M, N, K, TFLOP/s] of `a @ b` over GEMM_M x GEMM_NK x GEMM_NK;
    - "conv": [batch, Cin, Cout, k, HW, groups, layout, µs, TFLOP/s] of dense (k x k, stride 1,
      Cin -> Cout) and depthwise (groups = C) convolutions in channels_last and NCHW;
    - "batch_norm": [layout, channels, HW, bytes moved, GB/s] of eager inference BatchNorm (all its kernels), whose
      NCHW kernel reaches a fraction of the copy bandwidth;
    - "bandwidth": [bytes moved, GB/s] of an elementwise add (read + written) from 64 KiB to 1 GiB.
    timer(fn) -> ms per call (default: `kernel_ms`, the GPU's kernel time, as the cost model prices
    and bench/models.py measures; CUDA events around a small op time the host's launch instead)."""
    timer = timer or kernel_ms
    out: dict = {"dtype": str(dtype).removeprefix("torch."), "gemm": [], "conv": [], "bandwidth": []}
    for m in GEMM_M:
        for n in GEMM_NK:
            for k in GEMM_NK:
                a = torch.randn(m, k, device=device, dtype=dtype)
                b = torch.randn(k, n, device=device, dtype=dtype)
                us = timer(lambda a=a, b=b: a @ b) * 1e3
                out["gemm"].append([m, n, k, float(f"{2 * m * n * k / us / 1e6:.4g}")])
    for hw in CONV_HW:
        for c in CONV_C:
            if c * hw * hw > 256 * 56 * 56:  # larger than any stage of the usual image models
                continue
            for layout in ("channels_last", "contiguous"):
                fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
                x = torch.randn(CONV_BATCH, c, hw, hw, device=device, dtype=dtype).to(memory_format=fmt)
                shapes = [
                    (c, c, 1, 1),
                    (c, c, 3, 1),
                    (c, 2 * c, 1, 1),
                    (c, c, 3, c),
                    (c, c, 5, c),
                    (c, c, 7, c),
                ]
                for cin, cout, k, groups in shapes:
                    w = torch.randn(cout, cin // groups, k, k, device=device, dtype=dtype).to(
                        memory_format=fmt
                    )

                    def fn(x=x, w=w, k=k, g=groups):
                        return torch.nn.functional.conv2d(x, w, padding=k // 2, groups=g)

                    us = timer(fn) * 1e3
                    flops = 2 * CONV_BATCH * hw * hw * cout * (cin // groups) * k * k
                    out["conv"].append(
                        [
                            CONV_BATCH,
                            cin,
                            cout,
                            k,
                            hw,
                            groups,
                            layout,
                            round(us, 2),
                            float(f"{flops / us / 1e6:.4g}"),
                        ]
                    )
    out["batch_norm"] = []
    for hw in CONV_HW:
        for c in CONV_C:
            if c * hw * hw > 256 * 56 * 56:
                continue
            for layout in ("channels_last", "contiguous"):
                fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
                x = torch.randn(CONV_BATCH, c, hw, hw, device=device, dtype=dtype).to(memory_format=fmt)
                stats = [torch.rand(c, device=device, dtype=dtype) + 0.5 for _ in range(4)]

                def bn(x=x, s=stats):
                    return torch.nn.functional.batch_norm(x, s[0], s[1], s[2], s[3], training=False)

                us = timer(bn) * 1e3
                moved = 2 * x.numel() * _element_size(dtype)
                out["batch_norm"].append([layout, c, hw, moved, round(moved / us / 1e3, 1)])
    for moved in BANDWIDTH_BYTES:
        x = torch.empty(moved // 2 // _element_size(dtype), device=device, dtype=dtype).fill_(1)
        us = timer(lambda x=x: x.add(1)) * 1e3
        out["bandwidth"].append([moved, round(moved / us / 1e3, 1)])
    return out


def _element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the device table (JSON)")
    parser.add_argument("--name", help="the device's name in reports (default: torch's name for it)")
    parser.add_argument(
        "--curves", help="also time the suite's matmul shapes and elementwise sizes; write them here (JSON)"
    )
    parser.add_argument(
        "--efficiency", help="also sweep GEMM, convolution and elementwise sizes; write them here (JSON)"
    )
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    name = args.name or torch.cuda.get_device_name()
    table = Device(
        name=name,
        bandwidth_gbs=round(copy_bandwidth_gbs(), 1),
        fp32_tflops=round(matmul_tflops(torch.float32), 1),
        half_tflops=round(matmul_tflops(torch.bfloat16), 1),
        launch_us=round(launch_us(), 2),
        source=(
            f"measured by bench/calibrate.py on {torch.cuda.get_device_name()}, torch {torch.__version__}: "
            "1 GiB copy, GPU kernel time of a tiny op (torch.profiler median of 2,000), 8192^3 matmuls"
        ),
    )
    print(f"host-side issue cost per tiny eager op (not used): {host_launch_us():.2f} us")
    Path(args.out).write_text(device_to_json(table))
    print(device_to_json(table))
    if args.efficiency:
        t0 = time.perf_counter()
        swept = {"device": name, "torch": torch.__version__, **efficiency()}
        Path(args.efficiency).write_text(json.dumps(swept) + "\n")
        print(
            f"efficiency sweep: {len(swept['gemm'])} GEMMs, {len(swept['conv'])} convolutions, "
            f"{len(swept['batch_norm'])} batch norms, {len(swept['bandwidth'])} sizes in {time.perf_counter() - t0:.0f} s"
        )
    if args.curves:
        measured = {"device": name, "torch": torch.__version__, **curves()}
        Path(args.curves).write_text(json.dumps(measured, indent=1) + "\n")
        for row in measured["matmul"]:
            m, n, k, us, rate = row
            print(f"matmul M={m} N={n} K={k}: {us:.2f} us, {rate:.1f} TFLOP/s")
        for row in measured["elementwise"]:
            mb, us, gbs = row
            print(f"add moving {mb:.2f} MB: {us:.2f} us, {gbs:.1f} GB/s")


if __name__ == "__main__":
    main()
