"""Does a compiled bf16 BatchNorm (inference) round once? Each backend's output against the exact
result from the same bf16 input and parameters, rounded to bf16 once: the count of elements that
differ, and the mean abs error against float64. Needs CUDA (the Triton interpreter on CPU converts to
bf16 by truncation, so its counts say nothing of a GPU's):

    python bench/bn_rounding.py
"""

import copy

import torch
from torch import nn

import fuselint.backend  # noqa: F401  registers the backend

torch.manual_seed(0)
bn = nn.BatchNorm2d(32).eval()
bn.running_mean.uniform_(-0.5, 0.5)
bn.running_var.uniform_(0.5, 2)
bn.weight.data.uniform_(0.5, 1.5)
bn.bias.data.uniform_(-1, 1)
bb = copy.deepcopy(bn).to("cuda", torch.bfloat16)
x = (torch.randn(16, 32, 56, 56, device="cuda") * 2).to(torch.bfloat16)
p = {k: v.double() for k, v in bb.state_dict().items() if v.is_floating_point()}
exact = (x.double() - p["running_mean"][:, None, None]) / (p["running_var"][:, None, None] + 1e-5).sqrt()
exact = exact * p["weight"][:, None, None] + p["bias"][:, None, None]
once = exact.to(torch.bfloat16).double()
with torch.no_grad():
    for be in ("eager", "fuselint", "inductor"):
        torch._dynamo.reset()
        f = bb if be == "eager" else torch.compile(bb, backend=be)
        for fmt in (torch.contiguous_format, torch.channels_last):
            out = f(x.contiguous(memory_format=fmt)).double()
            print(
                f"{be:9s} {str(fmt):24s} differs from once-rounded at {(out != once).sum().item()} of "
                f"{out.numel()}; mean abs vs float64 {(out - exact).abs().mean().item():.4e}",
                flush=True,
            )
