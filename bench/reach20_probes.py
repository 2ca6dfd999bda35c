"""Dynamo's verdict on reach20's new caller-line findings (FL108, gb0092) in gpytorch 1.15.2 +
linear_operator 0.6.1: each probe compiles one call with the eager backend and prints the breaks
dynamo logged in gpytorch's and linear_operator's files (`file:line gbNNNN`):
    PYTHONPATH=. python bench/reach20_probes.py   (a venv with gpytorch, e.g. judge16's)
"""

from __future__ import annotations

import torch

from fuselint.graph.breaks_log import parse_break
from fuselint.graph.capture import _listening_to_breaks


def breaks(fn, *args) -> list[str]:
    torch._dynamo.reset()
    with _listening_to_breaks() as handler:
        torch.compile(fn, backend="eager")(*args)
    rows = set()
    for text, _ in handler.records:
        raw = parse_break(text)
        if raw is None:
            continue
        for f, n, _fn in raw.frames[-1:] or [(raw.file, raw.line, "")]:
            for package in ("gpytorch/", "linear_operator/"):
                if package in f:
                    rows.add(f"{package}{f.split(package, 1)[1]}:{n} {raw.gb_id}")
        if raw.file and any(p in raw.file for p in ("gpytorch/", "linear_operator/")):
            package = "gpytorch/" if "gpytorch/" in raw.file else "linear_operator/"
            rows.add(f"{package}{raw.file.split(package, 1)[1]}:{raw.line} {raw.gb_id}")
    return sorted(rows)


def main() -> None:
    import gpytorch

    torch.manual_seed(0)
    x = torch.randn(6, 2)
    probes = {
        "GridInterpolationKernel": (
            gpytorch.kernels.GridInterpolationKernel(gpytorch.kernels.RBFKernel(), grid_size=8, num_dims=2),
            lambda k, a: k(a, a).to_dense(),
        ),
        "RBFKernelGradGrad": (gpytorch.kernels.RBFKernelGradGrad(), lambda k, a: k(a, a).to_dense()),
        "RBFKernelGrad": (gpytorch.kernels.RBFKernelGrad(), lambda k, a: k(a, a).to_dense()),
        "Matern52KernelGrad": (gpytorch.kernels.Matern52KernelGrad(), lambda k, a: k(a, a).to_dense()),
    }
    for name, (module, call) in probes.items():
        try:
            rows = breaks(lambda a, m=module, c=call: c(m, a), x)
        except Exception as exc:  # a probe that fails says so, the others run
            rows = [f"failed: {type(exc).__name__}: {str(exc)[:200]}"]
        for row in rows or ["no break"]:
            print(f"{name}: {row}")


if __name__ == "__main__":
    main()
