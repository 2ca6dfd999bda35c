"""ResNet-50 stem max-pool (32 x 64 x 112 x 112 bf16), forward with indices and backward: ATen, fuselint's
hand kernels and Inductor, do_bench µs, and whether fuselint's results are bit-equal to ATen's. Needs CUDA:

    python bench/max_pool_kernels.py
"""

import torch
import triton.testing as tt

from fuselint.backend.max_pool import max_pool2d_grad, max_pool2d_with_indices

aten = torch.ops.aten
POOL = ([3, 3], [2, 2], [1, 1])


def aten_both(x, g):
    o, i = aten.max_pool2d_with_indices(x, *POOL, [1, 1], False)
    return o, aten.max_pool2d_with_indices_backward(g, x, *POOL, [1, 1], False, i)


def measure(layout: torch.memory_format) -> str:
    x = torch.randn(32, 64, 112, 112, device="cuda", dtype=torch.bfloat16).to(memory_format=layout)
    out, idx = aten.max_pool2d_with_indices(x, *POOL, [1, 1], False)
    g = torch.randn_like(out)
    mo, mi = max_pool2d_with_indices(x, *POOL, False)
    want = aten.max_pool2d_with_indices_backward(g, x, *POOL, [1, 1], False, idx)
    exact_fwd = torch.equal(mo, out) and torch.equal(mi, idx)
    exact_bwd = torch.equal(want, max_pool2d_grad(g, x, idx, *POOL))
    inductor = torch.compile(aten_both)
    inductor(x, g)
    runs = {
        "aten_fwd": lambda: aten.max_pool2d_with_indices(x, *POOL, [1, 1], False),
        "fuselint_fwd": lambda: max_pool2d_with_indices(x, *POOL, False),
        "aten_bwd": lambda: aten.max_pool2d_with_indices_backward(g, x, *POOL, [1, 1], False, idx),
        "fuselint_bwd": lambda: max_pool2d_grad(g, x, idx, *POOL),
        "inductor_fwd+bwd": lambda: inductor(x, g),
    }
    times = {k: round(tt.do_bench(f, rep=200) * 1000, 1) for k, f in runs.items()}
    return f"{layout}: exact forward {exact_fwd}, exact backward {exact_bwd}, µs {times}"


if __name__ == "__main__":
    for fmt in (torch.channels_last, torch.contiguous_format):
        print(measure(fmt), flush=True)
