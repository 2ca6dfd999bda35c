"""Dynamo checks behind reach20's held-out row (docs/NOTES.md, "reach20"): pytorch-forecasting 1.8.0,
its rule written before any lint. Every class `pytorch_forecasting.metrics` exports that subclasses
torchmetrics' `Metric` and builds with no arguments, compiled whole as `metric(y_pred, target)` (torchmetrics'
`Metric.forward` runs the subclass's `update` and `compute`), eval under no_grad; inputs from one table:
y_pred (4, 6) or (4, 6, k) where the metric holds k quantiles or k distribution arguments, positive floats
(distribution scales must be); target (4, 6) positive floats; class-wise metrics (`CrossEntropy`) take
(4, 6, 3) logits and integer labels. Break sites come from dynamo's `graph_breaks` log
(bench/break_probe.py); a call that fails (a build or compile ERROR row) gives none.

    V/bin/pip install torch==2.13.0 pytorch-forecasting==1.8.0
    cd bench && PYTHONPATH=$PWD/..:$PWD V/bin/python precision_untuned20_probes.py [--json SITES.json]
"""

from __future__ import annotations

import inspect
import sys

import torch
from break_probe import probe_main

PACKAGES = ("pytorch_forecasting",)
CLASSWISE = ("CrossEntropy",)


def inputs(name: str, metric) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    if name in CLASSWISE:
        return torch.randn(4, 6, 3, generator=gen), torch.randint(0, 3, (4, 6), generator=gen)
    k = len(getattr(metric, "quantiles", None) or ()) or len(
        getattr(metric, "distribution_arguments", None) or ()
    )
    shape = (4, 6, k) if k else (4, 6)
    return torch.rand(shape, generator=gen) + 0.1, torch.rand(4, 6, generator=gen) + 0.1


def runs() -> list:
    import pytorch_forecasting.metrics as metrics
    from torchmetrics import Metric

    out = []
    for name in sorted(
        getattr(metrics, "__all__", None) or [n for n in vars(metrics) if not n.startswith("_")]
    ):
        cls = getattr(metrics, name, None)
        if not (inspect.isclass(cls) and issubclass(cls, Metric)) or inspect.isabstract(cls):
            continue
        try:
            metric = cls()
            args = inputs(name, metric)
        except Exception as exc:  # the rule skips a metric that needs arguments; the row says so
            out.append((name, _failing(exc), ()))
            continue
        out.append((name, lambda metric=metric: metric, args))
    return out


def _failing(exc: Exception):
    def build():
        raise exc

    return build


if __name__ == "__main__":
    probe_main(runs, PACKAGES, "precision_untuned20_probes.py", sys.argv, drop_failed=True)
