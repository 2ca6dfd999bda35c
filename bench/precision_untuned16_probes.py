"""Dynamo checks behind bench/results/precision_untuned16.md (FL1 recall and precision on
gpytorch 1.15.2 + linear_operator 0.6.1, the HELD-OUT package of judge16, and on torchdiffeq 0.2.5,
a void first choice (judge4 had used it); entry points chosen by the rules written there before any
lint; torch 2.13 CPU).

gpytorch (`g_runs`): every kernel of `gpytorch.kernels.__all__` that builds with no argument, as
`k(x1, x2).to_dense()`, and the exact GP and SVGP of gpytorch's tutorials, their training loss (with
backward) and their prediction (`likelihood(model(x))`, mean and variance).

torchdiffeq (`t_runs`, `--torchdiffeq`): each run compiles one call of an exported solver function whole, on one seeded ODE function (an
`nn.Module`: Linear(3, 16), Tanh, Linear(16, 3)), `y0 = randn(4, 3)`, `t = linspace(0, 1, 4)`,
default options: `odeint` and `odeint_adjoint` (a "train" run: backward) for every distinct
method name of `SOLVERS`, `odeint` with a tuple state, `odeint_event`, `odeint_dense`. Break
sites come from dynamo's `graph_breaks` log (bench/break_probe.py).

    cd bench && PYTHONPATH=$PWD/..:$PWD python precision_untuned16_probes.py [--torchdiffeq] [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned16_sites.json (gpytorch) and precision_untuned16_torchdiffeq_sites.json,
which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import compile_run, listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("gpytorch", "linear_operator")
TORCHDIFFEQ = ("torchdiffeq",)


def vector_field() -> nn.Module:
    """dy/dt = MLP(y): the ODE function of a neural ODE (the time argument unused)."""

    class Field(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 3))

        def forward(self, t, y):
            return self.net(y)

    return Field()


def tuple_field() -> nn.Module:
    """The same field on a tuple state (y, z): z follows the first two components of y."""

    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.field = vector_field()

        def forward(self, t, state):
            y, z = state
            return self.field(t, y), y[:, :2] - z

    return Pair()


def t_runs() -> list:
    from torchdiffeq import odeint, odeint_adjoint, odeint_dense, odeint_event
    from torchdiffeq._impl.odeint import SOLVERS

    torch.manual_seed(0)
    y0 = torch.randn(4, 3)
    t = torch.linspace(0, 1, 4)
    methods = [name for name in SOLVERS if name != "fixed_adams"]  # the alias of implicit_adams

    def event_fn(t, y):
        return t - 0.5 + 0.01 * torch.tanh(y.sum())  # crosses zero near t = 0.5

    def solve(method):
        f = vector_field()
        return lambda y: odeint(f, y, t, method=method)

    def adjoint(method):
        f = vector_field()
        return lambda y: odeint_adjoint(f, y.requires_grad_(), t, method=method)

    def tupled(method):
        f = tuple_field()
        return lambda y: odeint(f, (y, y[:, :2].clone()), t, method=method)

    def event(method):
        f = vector_field()
        return lambda y: odeint_event(f, y, torch.tensor(0.0), event_fn=event_fn, method=method)

    def dense():
        f = vector_field()
        return lambda y: odeint_dense(f, y, torch.tensor(0.0), torch.tensor(1.0))(torch.tensor(0.5))

    runs = [(f"odeint {m}", lambda m=m: solve(m), (y0,)) for m in methods]
    runs += [(f"train odeint_adjoint {m}", lambda m=m: adjoint(m), (y0.clone(),)) for m in methods]
    runs += [(f"odeint tuple state {m}", lambda m=m: tupled(m), (y0,)) for m in ("dopri5", "rk4")]
    runs += [(f"odeint_event {m}", lambda m=m: event(m), (y0,)) for m in ("dopri5", "rk4")]
    runs += [("odeint_dense dopri5", dense, (y0,))]
    return runs


def g_runs() -> list:
    import gpytorch
    from gpytorch import kernels

    torch.manual_seed(0)
    x1, x2 = torch.randn(6, 2), torch.randn(5, 2)
    x, x_test = torch.randn(16, 2), torch.randn(5, 2)
    y = torch.sin(x.sum(-1))

    class ExactGPModel(gpytorch.models.ExactGP):
        """The exact GP of gpytorch's "Simple GP Regression" tutorial."""

        def __init__(self, train_x, train_y, likelihood):
            super().__init__(train_x, train_y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = kernels.ScaleKernel(kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    class SVGPModel(gpytorch.models.ApproximateGP):
        """The SVGP of gpytorch's "Stochastic Variational GP Regression" tutorial."""

        def __init__(self, inducing_points):
            distribution = gpytorch.variational.CholeskyVariationalDistribution(inducing_points.size(0))
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing_points, distribution, learn_inducing_locations=True
            )
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = kernels.ScaleKernel(kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def kernel(name):
        k = getattr(kernels, name)().eval()
        return lambda a, b: k(a, b).to_dense()

    def builds(name):
        try:
            getattr(kernels, name)()
            return True
        except Exception:  # the rule: only kernels that build with no argument
            return False

    def predict(model, likelihood):
        model.eval(), likelihood.eval()

        def call(a):
            observed = likelihood(model(a))
            return observed.mean, observed.variance

        return call

    def exact(train: bool):
        likelihood = gpytorch.likelihoods.GaussianLikelihood()
        model = ExactGPModel(x, y, likelihood)
        if not train:
            return predict(model, likelihood)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        return lambda a, b: -mll(model(a), b)

    def svgp(train: bool):
        likelihood = gpytorch.likelihoods.GaussianLikelihood()
        model = SVGPModel(torch.randn(8, 2))
        if not train:
            return predict(model, likelihood)
        elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=16)
        return lambda a, b: -elbo(model(a), b)

    names = [n for n in kernels.__all__ if isinstance(getattr(kernels, n), type) and builds(n)]
    runs = [(f"kernel {n}", lambda n=n: kernel(n), (x1, x2)) for n in names]
    runs += [
        ("train ExactGP mll", lambda: exact(True), (x, y)),
        ("ExactGP predict", lambda: exact(False), (x_test,)),
        ("train SVGP elbo", lambda: svgp(True), (x, y)),
        ("SVGP predict", lambda: svgp(False), (x_test,)),
    ]
    return runs


def runner(packages):
    """`compile_run`'s row, its sites named in `packages`; a call that fails (the rules: a solver
    that needs an option it was not given, a kernel that cannot run on plain inputs, fails eagerly
    too) gives its row and no sites."""

    def run(label, fn, args, breaks, kwargs=None):
        name = lambda path: package_site(path, packages, "precision_untuned16_probes.py")  # noqa: E731
        row, sites = compile_run(label, fn, args, breaks, name, kwargs)
        return row, [] if "compile ERROR" in row else sites

    return run


if __name__ == "__main__":
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    packages, runs = (TORCHDIFFEQ, t_runs) if "--torchdiffeq" in sys.argv else (PACKAGES, g_runs)
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    write_sites(out, probe_rows(runs(), runner(packages), packages, breaks, build=True))
