"""Where the time goes, kernel by kernel: fuselint's backend next to Inductor on conv models.

    PYTHONPATH=. python bench/kernel_profile.py            # on a CUDA GPU
    PYTHONPATH=. python bench/kernel_profile.py --models conv_relu_maxpool-bfloat16

For each model it prints the do_bench median of the whole compiled call and, from the
PyTorch profiler over 10 calls, the GPU time per kernel per call. Use it to find the kernel
that makes one backend slower than the other; bench/backend.py gives the headline numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "fixtures" / "verify"))

CALLS = 10


def models() -> dict:
    from backend import ConvReluPool
    from mbconv_block import entry as mbconv

    def conv_relu_maxpool(dtype):
        def build():
            model = ConvReluPool().cuda().to(dtype).eval()
            return model, (torch.randn(64, 32, 56, 56, device="cuda", dtype=dtype),)

        return build

    return {
        "conv_relu_maxpool-float32": conv_relu_maxpool(torch.float32),
        "conv_relu_maxpool-bfloat16": conv_relu_maxpool(torch.bfloat16),
        "mbconv-bfloat16": mbconv,
    }


def profile(fn, args, top: int) -> tuple[float, list[tuple[float, int, str]]]:
    """(median ms of one call, [(µs per call, launches per call, kernel)] for the top kernels)."""
    import triton
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch.no_grad():
        fn(*args)
        torch.cuda.synchronize()
        ms = triton.testing.do_bench(lambda: fn(*args), rep=200, return_mode="median")
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(CALLS):
                fn(*args)
            torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda e: -e.device_time_total)
    return ms, [(e.device_time_total / CALLS, e.count // CALLS, e.key) for e in rows[:top]]


def main(argv: list[str] | None = None) -> None:
    import fuselint.backend as fuselint_backend

    table = models()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(table), help="comma list of: " + ", ".join(table))
    ap.add_argument("--top", type=int, default=8, help="kernels listed per model and backend")
    opts = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("kernel_profile.py needs a CUDA GPU")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    backends = {"fuselint": fuselint_backend.fuselint_backend, "inductor": "inductor"}
    for name in opts.models.split(","):
        model, args = table[name]()
        for label, backend in backends.items():
            torch._dynamo.reset()
            ms, rows = profile(torch.compile(model, backend=backend), args, opts.top)
            print(f"== {name} {label}: {ms:.4f} ms per call")
            for us, launches, kernel in rows:
                print(f"   {us:9.1f} µs  x{launches:<2d} {kernel[:100]}")


if __name__ == "__main__":
    main()
