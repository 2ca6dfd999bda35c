"""Small GEMMs of one input, separate against one GEMM over their weights joined (the choice
behind fuselint/backend/gemm_groups.py), on the GPU.

    python bench/gemm_join.py

Per case: the separate GEMMs and the joined one, medians of 5 `do_bench` medians, their ratio,
and whether the joined result is bit-equal to the separate ones side by side; in bf16, then in
float32 (IEEE, no TF32: PyTorch's default).
"""

from __future__ import annotations

import statistics

import torch
from triton.testing import do_bench

# (name, M, K, the N of each GEMM, with bias): the q/k/v projections of the suite's models at
# their sizes, LLaMA's gate and up projections (larger: two waves each), and a grouped-query
# attention's narrower k and v.
CASES = [
    ("llama q,k,v", 4096, 1024, [1024] * 3, False),
    ("llama gate,up", 4096, 1024, [2816] * 2, False),
    ("bert q,k,v (addmm)", 4096, 768, [768] * 3, True),
    ("t5 q,k,v", 4096, 512, [512] * 3, False),
    ("gqa q,k,v", 4096, 1024, [1024, 256, 256], False),
]


def _pair(a, ws, bs, wj, bj):
    """(the separate GEMMs, the joined one) as functions of nothing."""
    if bs is None:
        return (lambda: [torch.mm(a, w.t()) for w in ws]), (lambda: torch.mm(a, wj.t()))
    return (
        (lambda: [torch.addmm(b, a, w.t()) for w, b in zip(ws, bs, strict=True)]),
        (lambda: torch.addmm(bj, a, wj.t())),
    )


def main() -> None:
    print(torch.cuda.get_device_name(), torch.__version__)
    for dtype in (torch.bfloat16, torch.float32):
        print(dtype)
        run(dtype)


def run(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    for name, m, k, widths, bias in CASES:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        ws = [torch.randn(n, k, device="cuda", dtype=dtype) / 32 for n in widths]
        bs = [torch.randn(n, device="cuda", dtype=dtype) for n in widths]
        wj, bj = torch.cat(ws, 0), torch.cat(bs)
        apart, joined = _pair(a, ws, bs if bias else None, wj, bj if bias else None)
        t_apart = statistics.median(do_bench(apart, warmup=50, rep=200) for _ in range(5))
        t_joined = statistics.median(do_bench(joined, warmup=50, rep=200) for _ in range(5))
        equal = torch.equal(joined(), torch.cat(apart(), 1))
        print(
            f"{name:20s} apart {t_apart * 1e3:7.1f} us  joined {t_joined * 1e3:7.1f} us  "
            f"ratio {t_joined / t_apart:.3f}  bit-equal {equal}",
            flush=True,
        )


if __name__ == "__main__":
    main()
