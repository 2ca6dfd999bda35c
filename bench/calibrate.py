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
  TFLOP/s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the device table (JSON)")
    parser.add_argument("--name", help="the device's name in reports (default: torch's name for it)")
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


if __name__ == "__main__":
    main()
