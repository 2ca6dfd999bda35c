"""Dynamo checks behind bench/results/precision_untuned8.md (FL1 recall and precision on
pyro-ppl 1.9.2, held out: chosen before any finding was read; torch 2.13 CPU).

Each run compiles real pyro code (pure Python) with random weights, tiny sizes, seeded, the way a
pyro user's compiled model or guide calls it: `log_prob` and `rsample` / `sample` of pyro's own
distributions, of `TransformedDistribution`s over pyro's transforms (training: log_prob;
sampling: rsample), `forward` of `pyro.nn` networks and `pyro.contrib.gp` kernels, and the tensor
helpers of `pyro.ops`. Break sites come from dynamo's `graph_breaks` log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned8_probes.py [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned8_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import compile_run as _compile_run
from break_probe import listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("pyro",)


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, PACKAGES, "precision_untuned8_probes.py")


# ---- runner -------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks, kwargs=None) -> tuple[str, list[str]]:
    """`break_probe.compile_run` with this file's sites named by `_user`."""
    return _compile_run(label, fn, args, breaks, _user, kwargs)


# ---- pyro ---------------------------------------------------------------------------------------


class _LogProb(nn.Module):
    """`-d.log_prob(x).sum()` with the distribution built in the call, as a model's `pyro.sample` does."""

    def __init__(self, make, modules=()) -> None:
        super().__init__()
        self.make = make
        self.parts = nn.ModuleList(modules)

    def forward(self, x):
        d = self.make()
        if x is None:  # a flow with no inverse: score what it sampled, as a guide does
            x = d.rsample((4,))
        return -d.log_prob(x).sum()


class _Sample(nn.Module):
    """`d.rsample(shape)` (or `sample` where the distribution has no reparameterised sample)."""

    def __init__(self, make, modules=(), shape=(2,), reparam=True) -> None:
        super().__init__()
        self.make, self.shape, self.reparam = make, shape, reparam
        self.parts = nn.ModuleList(modules)

    def forward(self, x):
        d = self.make()
        return (d.rsample(self.shape) if self.reparam else d.sample(self.shape)) * x.sum()


# Transforms with no inverse (pyro raises in eager for a value they did not sample): log_prob scores
# the transform's own sample.
_NO_INVERSE = frozenset(
    {"NeuralAutoregressive", "BlockAutoregressive", "Planar", "Radial", "Sylvester", "Polynomial"}
)


def p_runs() -> list:
    import pyro.distributions as dist
    import pyro.distributions.transforms as T
    from pyro.contrib.gp import kernels
    from pyro.nn import AutoRegressiveNN, DenseNN
    from pyro.ops import stats, tensor_utils

    torch.manual_seed(0)
    x3 = torch.randn(4, 3)
    angle = torch.rand(4) * 2 - 1
    counts = torch.tensor([0.0, 1.0, 2.0, 3.0])
    loc, scale = torch.zeros(3), torch.ones(3)
    own = {
        "VonMises": (lambda: dist.VonMises(torch.tensor(0.0), torch.tensor(2.0)), angle, False),
        "AsymmetricLaplace": (lambda: dist.AsymmetricLaplace(0.0, 1.0, 2.0), angle, True),
        "SoftAsymmetricLaplace": (lambda: dist.SoftAsymmetricLaplace(0.0, 1.0, 2.0), angle, True),
        "SoftLaplace": (lambda: dist.SoftLaplace(0.0, 1.0), angle, True),
        "SkewLogistic": (lambda: dist.SkewLogistic(0.0, 1.0, 2.0), angle, True),
        "Logistic": (lambda: dist.Logistic(0.0, 1.0), angle, True),
        "ZeroInflatedPoisson": (lambda: dist.ZeroInflatedPoisson(torch.tensor(2.0), gate=torch.tensor(0.3)), counts, False),
        "GammaPoisson": (lambda: dist.GammaPoisson(torch.tensor(2.0), torch.tensor(1.0)), counts, False),
        "BetaBinomial": (lambda: dist.BetaBinomial(torch.tensor(2.0), torch.tensor(3.0), 5), counts, False),
        "MultivariateStudentT": (lambda: dist.MultivariateStudentT(torch.tensor(4.0), loc, torch.eye(3)), x3, True),
        "ProjectedNormal": (lambda: dist.ProjectedNormal(torch.tensor([1.0, 0.5, 0.2])), x3 / x3.norm(dim=-1, keepdim=True), True),
        "LKJCholesky": (lambda: dist.LKJCholesky(3, torch.tensor(2.0)), torch.linalg.cholesky(torch.eye(3) * 2 + 1), False),
        "Stable": (lambda: dist.Stable(torch.tensor(1.5), torch.tensor(0.3)), None, True),
        "SineSkewed": (lambda: dist.SineSkewed(dist.VonMises(torch.zeros(2), torch.ones(2)).to_event(1), torch.tensor([0.2, 0.1])), torch.rand(4, 2) - 0.5, False),
        "Normal": (lambda: dist.Normal(loc, scale), x3, True),
    }  # fmt: skip
    runs = []
    for name, (make, value, reparam) in own.items():
        if value is not None:  # Stable's log_prob imports scipy, which pyro does not declare
            runs.append((f"{name} log_prob", _LogProb(make), (value,)))
        value = angle if value is None else value
        runs.append((f"{name} sample", _Sample(make, reparam=reparam), (value,)))

    base = lambda: dist.Normal(torch.zeros(3), torch.ones(3)).to_event(1)  # noqa: E731
    transforms = {
        "Spline": T.Spline(3, count_bins=4),
        "AffineAutoregressive": T.AffineAutoregressive(AutoRegressiveNN(3, [8])),
        "SplineAutoregressive": T.SplineAutoregressive(3, AutoRegressiveNN(3, [8], param_dims=[4, 4, 3, 4]), count_bins=4),
        "NeuralAutoregressive": T.NeuralAutoregressive(AutoRegressiveNN(3, [8], param_dims=[4, 4, 4]), hidden_units=4),
        "BlockAutoregressive": T.BlockAutoregressive(3),
        "Planar": T.Planar(3),
        "Radial": T.Radial(3),
        "Householder": T.Householder(3),
        "Sylvester": T.Sylvester(3),
        "MatrixExponential": T.MatrixExponential(3),
        "BatchNorm": T.BatchNorm(3),
        "Polynomial": T.Polynomial(AutoRegressiveNN(3, [8], param_dims=[6]), input_dim=3, count_degree=2, count_sum=2),
        "AffineCoupling": T.AffineCoupling(1, DenseNN(1, [8], param_dims=[2, 2])),
        "SplineCoupling": T.SplineCoupling(3, 1, DenseNN(1, [8], param_dims=[8, 8, 6, 8]), count_bins=4),
        "GeneralizedChannelPermute": T.GeneralizedChannelPermute(3),
        "LowerCholeskyAffine": T.LowerCholeskyAffine(torch.zeros(3), torch.eye(3)),
    }  # fmt: skip
    for name, t in transforms.items():
        module = [t] if isinstance(t, nn.Module) else []
        if name == "GeneralizedChannelPermute":
            image = lambda t=t: dist.TransformedDistribution(  # noqa: E731
                dist.Normal(torch.zeros(3, 2, 2), 1.0).to_event(3), [t]
            )
            runs.append((f"{name} log_prob", _LogProb(image, module), (torch.randn(4, 3, 2, 2),)))
            runs.append((f"{name} rsample", _Sample(image, module), (x3,)))
            continue
        make = lambda t=t: dist.TransformedDistribution(base(), [t])  # noqa: E731
        scored = None if name in _NO_INVERSE else x3
        runs.append((f"{name} log_prob", _LogProb(make, module), (scored,)))
        runs.append((f"train {name} log_prob", _LogProb(make, module), (scored,)))
        runs.append((f"{name} rsample", _Sample(make, module), (x3,)))

    runs += [
        ("AutoRegressiveNN forward", AutoRegressiveNN(3, [8]), (x3,)),
        ("DenseNN forward", DenseNN(3, [8], param_dims=[1, 2]), (x3,)),
        ("RBF kernel", kernels.RBF(3), (x3,)),
        ("Matern52 kernel", kernels.Matern52(3), (x3,)),
        ("Periodic kernel", kernels.Periodic(3), (x3,)),
        ("Sum kernel", kernels.Sum(kernels.RBF(3), kernels.Linear(3)), (x3,)),
        ("autocorrelation", stats.autocorrelation, (torch.randn(32),)),
        ("effective_sample_size", stats.effective_sample_size, (torch.randn(2, 32),)),
        ("hpdi", stats.hpdi, (torch.randn(64), 0.9)),
        ("waic", stats.waic, (torch.randn(8, 4),)),
        ("convolve", tensor_utils.convolve, (torch.randn(8), torch.randn(5))),
        ("dct", tensor_utils.dct, (torch.randn(8),)),
        ("block_diag_embed", tensor_utils.block_diag_embed, (torch.randn(2, 3, 3),)),
    ]  # fmt: skip
    return runs


def main() -> None:
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    runs: list = p_runs()
    records = probe_rows(
        runs, compile_run, PACKAGES, breaks, keep=lambda label: " probe " not in f" {label} "
    )
    write_sites(out, records)


if __name__ == "__main__":
    main()
