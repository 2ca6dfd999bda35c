"""Dynamo checks behind bench/results/precision_untuned16.md (FL1 recall and precision on
torchdiffeq 0.2.5, the HELD-OUT package of judge16, its entry points chosen by the rule written
there before any lint; torch 2.13 CPU).

Each run compiles one call of an exported solver function whole, on one seeded ODE function (an
`nn.Module`: Linear(3, 16), Tanh, Linear(16, 3)), `y0 = randn(4, 3)`, `t = linspace(0, 1, 4)`,
default options: `odeint` and `odeint_adjoint` (a "train" run: backward) for every distinct
method name of `SOLVERS`, `odeint` with a tuple state, `odeint_event`, `odeint_dense`. Break
sites come from dynamo's `graph_breaks` log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned16_probes.py [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned16_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import compile_run, listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("torchdiffeq",)


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


def run(label, fn, args, breaks, kwargs=None):
    """`compile_run`'s row; a call that fails (the rule: a solver that needs an option it was not
    given fails eagerly too) gives its row and no sites."""
    row, sites = compile_run(
        label,
        fn,
        args,
        breaks,
        lambda path: package_site(path, PACKAGES, "precision_untuned16_probes.py"),
        kwargs,
    )
    return row, [] if "compile ERROR" in row else sites


if __name__ == "__main__":
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    write_sites(out, probe_rows(t_runs(), run, PACKAGES, breaks, build=True))
