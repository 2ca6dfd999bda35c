"""Split reductions on a GPU: the reductions that leave most of the GPU idle unsplit, timed
with the split (default) and without it (FUSELINT_SPLIT=0), beside eager and Inductor.

    python bench/split_reductions.py            # on a GPU; prints one line per case

Each case is compiled once per setting in a fresh dynamo state; times are
``triton.testing.do_bench`` medians in µs, with the GB/s of the bytes read once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402


def cases() -> dict:
    torch.manual_seed(0)
    cl = torch.channels_last
    x64 = torch.randn(32, 64, 112, 112, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=cl)
    x256 = torch.randn(32, 256, 56, 56, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=cl)
    tok = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    xhat = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)

    def bn_stats(x):  # BatchNorm's training statistics, as the decomposition computes them
        return torch.var_mean(x.float(), [0, 2, 3], correction=0)

    def bn_backward_sums(gy, x):
        return gy.float().sum([0, 2, 3]), (gy.float() * x.float()).sum([0, 2, 3])

    def normalise_columns(h):  # statistics and the full-size values that need them
        h = h.float()
        return ((h - h.mean(0)) / h.std(0)).to(torch.bfloat16)

    def ln_weight_grads(gy, xhat):
        return (gy.float() * xhat.float()).sum(0), gy.float().sum(0)

    return {
        "bn_stats 32x64x112x112 bf16 channels_last": (bn_stats, (x64,)),
        "bn_stats 32x256x56x56 bf16 channels_last": (bn_stats, (x256,)),
        "bn_backward_sums 32x64x112x112 bf16": (bn_backward_sums, (x64, x64 * 0.5)),
        "ln_weight_grads 4096x768 bf16": (ln_weight_grads, (tok, xhat)),
        "normalise_columns 4096x768 bf16 (3 kernels)": (normalise_columns, (tok,)),
        "bias_grad 4096x3072 bf16": (
            lambda g: g.float().sum(0),
            (torch.randn(4096, 3072, device="cuda").bfloat16(),),
        ),
    }


def timed(fn, args) -> float:
    import triton

    fn(*args)
    fn(*args)
    return triton.testing.do_bench(lambda: fn(*args), warmup=25, rep=200) * 1000


def main() -> int:
    import fuselint.backend as fb

    print(
        "| case | eager µs | fuselint unsplit µs | fuselint split µs | Inductor µs | split GB/s | split kernels |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (fn, args) in cases().items():
        nbytes = sum(a.numel() * a.element_size() for a in args)
        row = {"eager": timed(fn, args)}
        for label, env in (("unsplit", "0"), ("split", "1")):
            os.environ["FUSELINT_SPLIT"] = env
            torch._dynamo.reset()
            mark = fb.history_mark()
            row[label] = timed(torch.compile(fn, backend="fuselint"), args)
            kernels = [k for r in fb.reports_since(mark) for k in r.kernels]
            if label == "split":
                split = [k.cfg.describe() for k in kernels if k.cfg.combine is not None]
        os.environ.pop("FUSELINT_SPLIT")
        torch._dynamo.reset()
        row["inductor"] = timed(torch.compile(fn), args)
        gbs = nbytes / row["split"] / 1e3
        print(
            f"| {name} | {row['eager']:.1f} | {row['unsplit']:.1f} | {row['split']:.1f} | "
            f"{row['inductor']:.1f} | {gbs:.0f} | {len(split)}: {'; '.join(split)[:160]} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
