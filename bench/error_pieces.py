"""Error against float64 of real-model pieces in bf16 (LayerNorm, GELUs, T5 RMSNorm, softmax, attention,
linear + epilogues): eager, fuselint and Inductor, max / mean abs. Needs CUDA:

    python bench/error_pieces.py
"""

import math

import torch
import torch.nn.functional as F

import fuselint.backend  # noqa: F401  registers the backend

torch.manual_seed(0)
dev = "cuda"
D = 768


def ln(x, w, b):
    return F.layer_norm(x, (D,), w, b, 1e-6)


def ln_res(x, y, w, b):
    h = x + y
    return h, F.layer_norm(h, (D,), w, b, 1e-6)


def gelu_bias(x, b):
    return F.gelu(x + b)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def rms(x, w):
    var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(var + 1e-6)
    return w * x.to(w.dtype)


def softmax_bias(s, bias):
    s = s + bias
    return F.softmax(s.float(), dim=-1).type_as(s)


def attn_manual(q, k, v, bias):
    s = torch.matmul(q, k.transpose(3, 2)) + bias
    p = F.softmax(s.float(), dim=-1).type_as(s)
    return torch.matmul(p, v)


def lin_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


def lin_res_ln(x, w, b, r, lw, lb):
    h = F.linear(x, w, b) + r
    return F.layer_norm(h, (D,), lw, lb, 1e-6)


def bf(*shape, scale=1.0):
    return (torch.randn(*shape, device=dev) * scale).to(torch.bfloat16)


cases = {
    "ln": (ln, (bf(32, 197, D, scale=3), bf(D), bf(D))),
    "ln_res": (ln_res, (bf(32, 197, D, scale=3), bf(32, 197, D), bf(D), bf(D))),
    "gelu_bias": (gelu_bias, (bf(32, 197, 3072, scale=2), bf(3072))),
    "gelu_tanh": (gelu_tanh, (bf(8, 512, 3072, scale=2),)),
    "rms": (rms, (bf(16, 256, 512, scale=3), bf(512))),
    "softmax_bias": (softmax_bias, (bf(16, 8, 256, 256, scale=4), bf(1, 8, 256, 256, scale=2))),
    "attn_manual": (
        attn_manual,
        (bf(16, 8, 256, 64), bf(16, 8, 256, 64), bf(16, 8, 256, 64), bf(1, 8, 256, 256)),
    ),
    "lin_gelu": (lin_gelu, (bf(32, 197, D), bf(3072, D, scale=0.03), bf(3072))),
    "lin_res_ln": (
        lin_res_ln,
        (bf(32, 197, 3072), bf(D, 3072, scale=0.02), bf(D), bf(32, 197, D), bf(D), bf(D)),
    ),
}


def first(o):
    return o[-1] if isinstance(o, tuple) else o


for name, (fn, args) in cases.items():
    ref = first(fn(*[a.double() for a in args]))
    row = []
    for be in ("eager", "fuselint", "inductor"):
        torch._dynamo.reset()
        f = fn if be == "eager" else torch.compile(fn, backend=be)
        out = first(f(*args)).double()
        d = (out - ref).abs()
        row.append(f"{be} {d.max().item():.3g}/{d.mean().item():.3g}")
    print(f"{name:13s} " + "  ".join(row), flush=True)
