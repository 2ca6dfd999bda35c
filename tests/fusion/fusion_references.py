"""Reference graphs on which the planner must agree with Inductor's kernel count.

Each entry: name -> (build() returning (callable, args), Inductor's GPU kernel count).
The count is generated kernels plus extern calls (mm/conv) that Inductor's wrapper launches.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _softmax(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


class Block(nn.Module):
    """Pre-norm transformer block: attention by matmuls + hand-written softmax, GELU MLP."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, -1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = _softmax((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5)
        y = (a @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def cos_sin():
    return (lambda x: torch.sin(torch.cos(x))), (torch.randn(64, 32),)


def softmax():
    return _softmax, (torch.randn(64, 32),)


def silu_mul():
    return (lambda a, b: F.silu(a) * b), (torch.randn(64, 32), torch.randn(64, 32))


def residual_layernorm():
    ln = nn.LayerNorm(32)

    def fn(x, r):
        h = x + r
        return h, ln(h)

    return fn, (torch.randn(64, 32), torch.randn(64, 32))


def linear_gelu():
    lin = nn.Linear(32, 64)
    return (lambda x: F.gelu(lin(x))), (torch.randn(16, 32),)


def transformer_block():
    return Block(), (torch.randn(2, 8, 32),)


def conv_relu_maxpool():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    return model, (torch.randn(2, 3, 16, 16),)


def mean_center():
    return (lambda x: x - x.mean()), (torch.randn(512, 512),)


# Inductor's kernel launches per graph on a GPU (torch 2.11-2.13). Measured on CPU here with
# bench/inductor_kernel_counts.py (CPU counts in comments where the CPU backend differs);
# the GPU column is what that script prints on CUDA.
REFERENCES = {
    # 1 fused pointwise kernel (CPU: cpp_fused_cos_sin_0)
    "cos_sin": (cos_sin, 1),
    # amax+sub+exp+sum+div in one reduction kernel (CPU: cpp_fused_amax_div_exp_sub_sum_0)
    "softmax": (softmax, 1),
    # CPU: cpp_fused_mul_silu_0
    "silu_mul": (silu_mul, 1),
    # add + var_mean + normalize, both outputs from one kernel (CPU: cpp_fused_add_native_layer_norm_0)
    "residual_layernorm": (residual_layernorm, 1),
    # extern addmm + one GELU kernel (Inductor on GPU does not fuse the epilogue into aten mm)
    "linear_gelu": (linear_gelu, 2),
    # 6 extern mm (4 addmm + 2 bmm) + 7 kernels: LN1; q/k/v contiguous copies (horizontal);
    # softmax; head merge copy; residual add + LN2; GELU; residual add (recomputes x + proj).
    # Measured with Inductor's SDPA pattern rewrite off (fuselint does not rewrite to SDPA; with
    # it on, Inductor replaces the attention by one sdpa call). CPU puts the v copy into the
    # softmax kernel instead of the q/k one: same count.
    "transformer_block": (transformer_block, 13),
    # extern conv + one kernel (ReLU inlined into the max-pool windows). On GPU Inductor peels
    # the conv bias off into that kernel; CPU adds a weight-layout kernel (3 on CPU).
    "conv_relu_maxpool": (conv_relu_maxpool, 2),
    # a mean over 262144 elements into one value: Inductor splits it (partial sums, then their
    # total) and runs the subtraction as a third kernel. Derived from its split heuristic
    # (choices.reduction_split_factor: < 2 x SMs outputs, > 8192 per output), not yet measured.
    "mean_center": (mean_center, 3),
}

# Where Inductor's CPU (C++) backend launches a different number than on GPU (measured here,
# torch 2.13 CPU): it converts the conv weight's layout in a kernel of its own, and it does
# not split reductions (one C++ kernel loops over the mean, then the subtraction).
CPU_COUNTS = {"conv_relu_maxpool": 3, "mean_center": 1}
