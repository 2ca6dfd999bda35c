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


class ConvNeXtBlock(nn.Module):
    """Depthwise conv, channels-last LayerNorm between permutes, MLP, layer scale, residual."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.ln = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.ln(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class LlamaBlock(nn.Module):
    """RMSNorm, rotary embedding (cat of halves), causal attention by matmuls, SwiGLU MLP."""

    def __init__(self, d: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)

    @staticmethod
    def _rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    @staticmethod
    def _rope(x, cos, sin):
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def forward(self, x, cos, sin, mask):
        b, t, c = x.shape
        hd = c // self.heads
        y = self._rms(x, self.n1)
        q, k, v = (proj(y).view(b, t, self.heads, hd).transpose(1, 2) for proj in (self.q, self.k, self.v))
        q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
        a = torch.softmax((q @ k.transpose(-1, -2)) / hd**0.5 + mask, -1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(b, t, c))
        y = self._rms(x, self.n2)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


def convnext_block():
    return ConvNeXtBlock().eval(), (torch.randn(2, 16, 8, 8),)


def llama_block():
    t = 8
    mask = torch.triu(torch.full((t, t), -1e9), 1)
    return LlamaBlock(), (torch.randn(2, t, 64), torch.randn(t, 16), torch.randn(t, 16), mask)


def mean_center():
    return (lambda x: x - x.mean()), (torch.randn(512, 512),)


# Inductor's kernel launches per graph on a GPU: generated kernels plus extern calls, measured on an
# H100 (torch 2.11, bench/results/inductor_counts_h100.md) unless a comment says otherwise. The
# plan must launch as many (tests/fusion/test_inductor_agreement.py).
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
    # 6 extern mm (4 addmm + 2 bmm) + 7 kernels: LN1; the q/k/v copies into per-head buffers in one
    # kernel (they read slices of one mm output); softmax; head merge copy; residual add + LN2;
    # GELU; residual add (recomputes x + proj). Torch 2.12+ fuses the copies of split slices
    # horizontally (pytorch PR 175376): 13 on 2.13 (measured on CPU, where the scheduler's rule is
    # the same); 2.11 copies q, k and v in a kernel each (15 on the H100, see BEFORE_2_12).
    # Inductor's SDPA pattern rewrite is off (fuselint does not rewrite to SDPA).
    "transformer_block": (transformer_block, 13),
    # 2 channels_last copies (input, weight; Inductor's layout heuristic says channels-last pays),
    # extern conv without its bias, bias + ReLU (written out: the pool reads each element 4 times
    # and that data reads 2 tensors), the max-pool window kernel.
    "conv_relu_maxpool": (conv_relu_maxpool, 5),
    # a mean over 262144 elements into one value: Inductor splits it (partial sums, then their
    # total) and runs the subtraction as a third kernel (choices.reduction_split_factor).
    "mean_center": (mean_center, 3),
    # channels_last copy of the input (the depthwise weight already is), extern conv, bias +
    # LayerNorm over permuted channels, addmm, GELU, addmm, layer scale + permute back + residual.
    "convnext_block": (convnext_block, 7),
}

# Inductor before torch 2.12 launches more where it did not yet fuse copies of split slices.
BEFORE_2_12 = {"transformer_block": 15}


def inductor_gpu_count(name: str, version: str) -> int:
    """Inductor's GPU launches for reference `name` under torch `version` ("2.11.0+cu130")."""
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) < (2, 12) and name in BEFORE_2_12:
        return BEFORE_2_12[name]
    return REFERENCES[name][1]


# Graphs where the plan knowingly differs from Inductor (printed by the bench, not asserted):
# name -> (build, Inductor's count measured on CPU, why the plan differs).
DIVERGENT = {
    # Inductor also fuses k's contiguous copy, read through a transpose, into the rotary kernel
    # (its index algebra recomputes the cat at transposed positions); a prologue here may not
    # contain a gather, so the plan keeps that copy as a kernel of its own: 18 vs 17.
    "llama_block": (llama_block, 17, "a gather read through a transpose is not recomputed"),
}

# Where Inductor's CPU (C++) backend launches a different number than on GPU (measured, torch
# 2.13 CPU): it keeps the conv bias inside mkldnn's convolution (so ReLU fuses into the pool) and
# copies only the input to channels_last, and it does not split reductions.
CPU_COUNTS = {"conv_relu_maxpool": 3, "mean_center": 1}
