"""Dynamo checks behind judge16's verdicts on gpytorch 1.15.2 + linear_operator 0.6.1 findings
(bench/results/precision_untuned16.md) and the general classes it fixes (torch 2.13, CPU, backend
eager): each case compiles one real call and prints the package lines where dynamo logs a break.

    cd bench && PYTHONPATH=$PWD/..:$PWD python judge16_dynamo_facts.py
"""

from __future__ import annotations

import torch
from break_probe import compile_run, listen, package_site

PACKAGES = ("gpytorch", "linear_operator")


def cases() -> list:
    from gpytorch import kernels
    from gpytorch.kernels import GridKernel
    from linear_operator.operators import ZeroLinearOperator

    torch.manual_seed(0)
    x = torch.randn(6, 2)
    grid = GridKernel(kernels.RBFKernel(), grid=torch.linspace(0, 1, 5).unsqueeze(-1).repeat(1, 2))
    zero = ZeroLinearOperator(6, 6)

    def dense(k, **kw):
        return lambda a: k.eval()(a, a, **kw).to_dense()

    return [
        ("LinearKernel k(x, x)", dense(kernels.LinearKernel()), (x,)),
        ("RBFKernelGrad k(x, x)", dense(kernels.RBFKernelGrad()), (x,)),
        ("Matern52KernelGrad k(x, x, diag=True)", dense(kernels.Matern52KernelGrad(), diag=True), (x,)),
        ("GridKernel.is_ragged", lambda a: a * grid.is_ragged, (x,)),
        ("ZeroLinearOperator.matmul", lambda a: zero.matmul(a).to_dense(), (x,)),
        ("torch.equal assigned, then tested", equal_then_test, (x, x.clone())),
    ]


def equal_then_test(a, b):
    """kernel.py:340's shape: the break is on the `torch.equal` line, not on the `if`."""
    same = torch.equal(a, b)
    out = a + 1
    if same:
        return out * 2
    return out


if __name__ == "__main__":
    breaks = listen()
    name = lambda path: package_site(path, PACKAGES, "judge16_dynamo_facts.py")  # noqa: E731
    for label, fn, args in cases():
        row, _sites = compile_run(label, fn, args, breaks, name)
        print(row, flush=True)
