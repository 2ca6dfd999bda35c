"""Dynamo checks behind bench/results/precision_untuned7.md (FL1 precision and recall on
zuko 1.6.0, the tune package, and normflows 1.7.3, the held-out one; torch 2.13 CPU).

Each run compiles real package code (both are pure Python) with random weights, tiny sizes,
seeded. zuko's flows are lazy: `flow(c)` builds a distribution in the call, whose `log_prob`
(training) and `rsample` (sampling) users compile as one function. normflows' models are
compiled the way its examples train and sample: `forward_kld`, `reverse_kld`, `log_prob`,
`sample`, and `forward` / `inverse` of single flows. Break sites come from dynamo's `graph_breaks`
log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned7_probes.py [--only zn] [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned7_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import compile_run as _compile_run
from break_probe import listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("zuko", "normflows")


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, PACKAGES, "precision_untuned7_probes.py")


# ---- runner -------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks, kwargs=None) -> tuple[str, list[str]]:
    """`break_probe.compile_run` with this file's sites named by `_user`."""
    return _compile_run(label, fn, args, breaks, _user, kwargs)


# ---- zuko ---------------------------------------------------------------------------------------


def z_runs() -> list:
    import zuko

    torch.manual_seed(0)
    x = torch.randn(4, 3)
    c = torch.randn(4, 2)
    small = {"hidden_features": (16, 16)}
    flows = {
        "MAF": zuko.flows.MAF(3, 2, transforms=2, **small),
        "NSF": zuko.flows.NSF(3, 2, transforms=2, **small),
        "NCSF": zuko.flows.NCSF(3, 2, transforms=2, **small),
        "RealNVP": zuko.flows.RealNVP(3, 2, transforms=2, **small),
        "NICE": zuko.flows.NICE(3, 2, transforms=2, **small),
        "SOSPF": zuko.flows.SOSPF(3, 2, transforms=2, **small),
        "BPF": zuko.flows.BPF(3, 2, transforms=2, **small),
        "NAF": zuko.flows.NAF(3, 2, transforms=1, signal=4, network={"hidden_features": (8, 8)}, **small),
        "UNAF": zuko.flows.UNAF(3, 2, transforms=1, signal=4, network={"hidden_features": (8, 8)}, **small),
        "GF": zuko.flows.GF(3, 2, transforms=2, components=4, **small),
        "GMM": zuko.flows.GMM(3, 2, components=3, **small),
        "CNF": zuko.flows.CNF(3, 2, hidden_features=(16,)),
    }
    runs = []
    for name, flow in flows.items():
        runs.append((f"{name} log_prob", _Objective(flow), (x, c)))
        runs.append((f"train {name} log_prob", _Objective(flow), (x, c)))
        runs.append((f"{name} rsample", _Sampler(flow), (c,)))
    maf0 = zuko.flows.MAF(3, 0, transforms=2, **small)
    runs.append(("MAF unconditional log_prob", _Objective(maf0), (x, None)))
    runs.append(("MAF unconditional rsample", _Sampler(maf0), (None,)))
    return runs


class _Objective(nn.Module):
    """What a zuko user trains: `loss = -flow(c).log_prob(x).mean()`, the distribution built in the call."""

    def __init__(self, flow) -> None:
        super().__init__()
        self.flow = flow

    def forward(self, x, c):
        dist = self.flow() if c is None else self.flow(c)
        return -dist.log_prob(x).mean()


class _Sampler(nn.Module):
    """What a zuko user samples with: `flow(c).rsample()`."""

    def __init__(self, flow) -> None:
        super().__init__()
        self.flow = flow

    def forward(self, c):
        from zuko.flows import GMM

        dist = self.flow() if c is None else self.flow(c)
        if isinstance(self.flow, GMM):  # a mixture has no reparameterised sample
            return dist.sample()
        return dist.rsample((2,)) if c is None else dist.rsample()


# ---- normflows ----------------------------------------------------------------------------------


def n_runs() -> list:
    import normflows as nf

    torch.manual_seed(0)
    x = torch.randn(8, 2)

    def real_nvp(k: int = 2):
        flows = []
        for _ in range(k):
            flows.append(nf.flows.AffineCouplingBlock(nf.nets.MLP([1, 16, 16, 2], init_zeros=True)))
            flows.append(nf.flows.Permute(2, mode="swap"))
        return nf.NormalizingFlow(nf.distributions.DiagGaussian(2), flows)

    def spline(kind: str):
        flow = {"coupled": nf.flows.CoupledRationalQuadraticSpline,
                "autoregressive": nf.flows.AutoregressiveRationalQuadraticSpline}[kind]  # fmt: skip
        flows = [flow(2, 1, 16), nf.flows.LULinearPermute(2), flow(2, 1, 16)]
        return nf.NormalizingFlow(nf.distributions.DiagGaussian(2, trainable=False), flows)

    target = nf.distributions.TwoMoons()
    planar = nf.NormalizingFlow(
        nf.distributions.DiagGaussian(2), [nf.flows.Planar((2,)) for _ in range(2)], target
    )
    radial = nf.NormalizingFlow(
        nf.distributions.DiagGaussian(2), [nf.flows.Radial((2,)) for _ in range(2)], target
    )
    maf = nf.NormalizingFlow(nf.distributions.DiagGaussian(2),
                             [nf.flows.MaskedAffineAutoregressive(2, 16, num_blocks=1), nf.flows.Permute(2)])  # fmt: skip
    actnorm = nf.NormalizingFlow(nf.distributions.DiagGaussian(2),
                                 [nf.flows.ActNorm((2,)), nf.flows.AffineCouplingBlock(nf.nets.MLP([1, 16, 2]))])  # fmt: skip
    residual = nf.NormalizingFlow(nf.distributions.DiagGaussian(2),
                                  [nf.flows.Residual(nf.nets.LipschitzMLP([2, 16, 2], init_zeros=True))])  # fmt: skip
    gmm = nf.NormalizingFlow(nf.distributions.GaussianMixture(3, 2),
                             [nf.flows.AffineCouplingBlock(nf.nets.MLP([1, 16, 2])), nf.flows.Permute(2, mode="swap")])  # fmt: skip
    masked = nf.NormalizingFlow(nf.distributions.DiagGaussian(2), [nf.flows.MaskedAffineFlow(
        torch.tensor([1.0, 0.0]), nf.nets.MLP([2, 16, 2], init_zeros=True), nf.nets.MLP([2, 16, 2], init_zeros=True))])  # fmt: skip
    nvp = real_nvp()
    coupled, autoreg = spline("coupled"), spline("autoregressive")
    return [
        ("train RealNVP forward_kld", nvp.forward_kld, (x,)),
        ("RealNVP log_prob", nvp.log_prob, (x,)),
        ("RealNVP sample(8)", nvp.sample, (8,)),
        ("train coupled RQ spline forward_kld", coupled.forward_kld, (x,)),
        ("coupled RQ spline sample(8)", coupled.sample, (8,)),
        ("train autoregressive RQ spline forward_kld", autoreg.forward_kld, (x,)),
        ("autoregressive RQ spline sample(8)", autoreg.sample, (8,)),
        ("train Planar reverse_kld (TwoMoons target)", planar.reverse_kld, (8,)),
        ("train Radial reverse_kld (TwoMoons target)", radial.reverse_kld, (8,)),
        ("train Planar reverse_alpha_div", planar.reverse_alpha_div, (8,)),
        ("train MAF forward_kld", maf.forward_kld, (x,)),
        ("MAF sample(8)", maf.sample, (8,)),
        ("train ActNorm + coupling forward_kld", actnorm.forward_kld, (x,)),
        ("train residual flow forward_kld", residual.forward_kld, (x,)),
        ("residual flow sample(8)", residual.sample, (8,)),
        ("train GMM base + coupling forward_kld", gmm.forward_kld, (x,)),
        ("GMM base sample(8)", gmm.sample, (8,)),
        ("train MaskedAffineFlow forward_kld", masked.forward_kld, (x,)),
        ("TwoMoons log_prob", target.log_prob, (x,)),
    ]  # fmt: skip


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else "zn"
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    runs: list = []
    if "z" in only:
        runs += z_runs()
    if "n" in only:
        runs += n_runs()
    records = probe_rows(
        runs, compile_run, PACKAGES, breaks, keep=lambda label: " probe " not in f" {label} "
    )
    write_sites(out, records)


if __name__ == "__main__":
    main()
