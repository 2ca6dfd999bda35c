"""Rounding ties at a residual add after an eval BatchNorm at timm's initialisation, in plain arithmetic
(CPU, no model):

    python bench/error_ties.py

At initialisation (running mean 0, variance 1, weight 1, bias 0) eval BatchNorm multiplies by
k = 1/sqrt(1 + 1e-5), within 5e-6 of 1. A residual block ends in bf16(BN(c) + s), with c (the convolution's
output) and s (the shortcut) bf16 numbers. Eager rounds BN(c) first, which gives back c, then rounds c + s,
ties to even. A compiled kernel fuses both and rounds k*c + s once. The sum of two bf16 numbers often lies
exactly halfway between two bf16 numbers, and k < 1 then moves every such tie the same way: towards a
smaller |c|. The exact value agrees (the fused result is the correctly rounded one), but its error
of half an ulp now has the sign of -c in every tied element, where eager's ties-to-even errors have no sign
preference. The script prints, for normal c and s: the share of tied sums, and each form's mean abs error
and mean error times sign(c) (0 when uncorrelated), against the exact k*c + s. `--k` picks another scale.
"""

from __future__ import annotations

import argparse

import torch


def tie_stats(c: torch.Tensor, s: torch.Tensor, k: float) -> dict:
    """c, s: bf16 tensors. Errors of bf16(bf16(k*c) + s) ("eager") and bf16(k*c + s) ("fused") against
    k*c + s in float64; `ties`: the share of elements whose c + s lies exactly halfway between two bf16s."""
    c64, s64 = c.double(), s.double()
    exact = k * c64 + s64
    eager = ((k * c64).to(torch.bfloat16).double() + s64).to(torch.bfloat16).double()
    fused = (k * c.float() + s.float()).to(torch.bfloat16).double()
    total = c64 + s64
    low = total.to(torch.bfloat16).double()
    # the bf16 neighbour on the other side of `total`, and whether `total` is their midpoint
    up = torch.nextafter(low.to(torch.bfloat16), torch.full_like(c, float("inf"))).double()
    down = torch.nextafter(low.to(torch.bfloat16), torch.full_like(c, float("-inf"))).double()
    other = torch.where(total >= low, up, down)
    ties = (total - low).abs() == (other - low).abs() / 2
    sign = torch.sign(c64)
    out = {"ties": ties.double().mean().item()}
    for name, got in (("eager", eager), ("fused", fused)):
        err = got - exact
        out[name] = (err.abs().mean().item(), (err * sign).mean().item())
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--k", type=float, default=(1 + 1e-5) ** -0.5)
    p.add_argument("--n", type=int, default=1 << 22)
    a = p.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    print(f"k = {a.k!r}; {a.n} elements; errors x1e-4: mean abs / mean of error*sign(c)")
    print("| c scale | s scale | tied sums | eager | fused |")
    print("|---|---|---|---|---|")
    for sc, ss in ((1.0, 1.0), (0.5, 1.0), (1.0, 0.5), (0.25, 1.0)):
        c = (torch.randn(a.n, generator=g) * sc).to(torch.bfloat16)
        s = (torch.randn(a.n, generator=g) * ss).to(torch.bfloat16)
        r = tie_stats(c, s, a.k)
        cells = " | ".join(f"{r[f][0] * 1e4:.3f} / {r[f][1] * 1e4:+.3f}" for f in ("eager", "fused"))
        print(f"| {sc} | {ss} | {r['ties']:.3f} | {cells} |")


if __name__ == "__main__":
    main()
