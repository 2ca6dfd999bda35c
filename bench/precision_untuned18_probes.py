"""Dynamo checks behind bench/results/precision_untuned18.md (FL1 recall and precision on
torch-uncertainty 0.13.0, the HELD-OUT package of reach18; entry points chosen by the rule written
there before any lint). torch 2.14.1 with torchvision 0.29.1 on the CPU, in a venv of their own: PyPI's
torchvision 0.28 is a CUDA build that does not load beside the CPU torch 2.13 (docs/NOTES.md, Environment).

Every model builder of `torch_uncertainty.models`, every layer of `torch_uncertainty.layers` and every
metric of `torch_uncertainty.metrics`, built from one table of argument values (`FILL`), compiled
whole: models and layers in eval under no_grad and "train" with backward, metrics' `update` then
`compute`. Break sites come from dynamo's `graph_breaks` log (bench/break_probe.py); a call that
fails (a build or compile ERROR row) gives none.

    python3 -m venv V && V/bin/pip install torch==2.14.1 torchvision==0.29.1 torch-uncertainty==0.13.0 lightning rich
    cd bench && CUDA_VISIBLE_DEVICES= PYTHONPATH=$PWD/..:$PWD V/bin/python precision_untuned18_probes.py [--json SITES.json]

(`CUDA_VISIBLE_DEVICES=` empty: that CUDA build of torch otherwise loads NVML for every fake tensor
dynamo makes on a machine without a GPU, which made a model's compile take minutes instead of seconds.)

`--groups models,layers,metrics` (the default: all three) runs only the named groups, so that the
slow model compiles and the quick layer and metric ones can run in two processes; each writes its
own `--json`, and the sites file is their concatenation. `--json` writes every torch_uncertainty break site (package, model, file from the package root,
line, gb id): bench/results/precision_untuned18_sites.json, which `bench/rescore_judged.py --recall`
scores.
"""

from __future__ import annotations

import inspect
import signal
import sys

import torch
from break_probe import CallWith, compile_run, listen, package_site, probe_header, probe_rows, write_sites

PACKAGES = ("torch_uncertainty",)
GROUPS = ("models", "layers", "metrics")
LIMIT_S = 300  # seconds one call may compile
# The one table the rule fills required arguments from (the smallest documented value).
FILL = {
    "in_channels": 3, "num_classes": 10, "arch": 18, "num_estimators": 2, "alpha": 2, "gamma": 1,
    "scale": 2.0, "style": "cifar", "in_features": 8, "out_features": 8, "out_channels": 8,
    "normalized_shape": 8, "num_features": 8, "d_model": 8, "embed_dim": 8, "kernel_size": 3,
    "num_heads": 2, "nhead": 2, "task": "multiclass",
}  # fmt: skip
LAYER_CHANNELS = 8  # a layer's in_channels/in_features (the model table's 3 is for images)


def required(fn, fill: dict) -> dict:
    """The arguments `fn`'s signature requires, from `fill`; KeyError names one the table lacks."""
    out = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name == "self":
            continue
        if param.default is inspect.Parameter.empty and param.kind not in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            out[name] = fill[name]
    return out


def model_input(name: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    if "inception_time" in name:
        return torch.randn(4, 3, 64, generator=gen)
    if name.startswith("bts"):
        return torch.randn(4, 3, 64, 64, generator=gen)
    return torch.randn(4, 3, 32, 32, generator=gen)


def layer_input(name: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    lowered = name.lower()
    if "attention" in lowered or "transformer" in lowered:
        shape = (4, 6, 8)
    elif lowered.endswith("1d"):
        shape = (4, 8, 16)
    elif lowered.endswith("3d"):
        shape = (4, 8, 8, 8, 8)
    elif lowered.endswith(("2d", "nd")) or "conv" in lowered or lowered.endswith("norm"):
        shape = (4, 8, 16, 16)
    else:
        shape = (4, 8)
    return torch.randn(*shape, generator=gen)


def runs() -> list:
    import torch_uncertainty.layers as layers
    import torch_uncertainty.metrics as metrics
    import torch_uncertainty.models as models

    groups = sys.argv[sys.argv.index("--groups") + 1].split(",") if "--groups" in sys.argv else GROUPS
    out = []
    for name in sorted(n for n in vars(models) if not n.startswith("_") and "models" in groups):
        builder = getattr(models, name)
        if not inspect.isfunction(builder):
            continue

        def make(builder=builder):
            torch.manual_seed(0)
            return builder(**required(builder, FILL))

        x = model_input(name)
        out += [(name, make, (x,)), (f"train {name}", make, (x,))]
    layer_fill = {**FILL, "in_channels": LAYER_CHANNELS}
    for name in sorted(n for n in vars(layers) if not n.startswith("_") and "layers" in groups):
        cls = getattr(layers, name)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
            continue

        def make(cls=cls):
            torch.manual_seed(0)
            return cls(**required(cls.__init__, layer_fill))

        x = layer_input(name)
        out += [(name, make, (x,)), (f"train {name}", make, (x,))]
    gen = torch.Generator().manual_seed(0)
    probs = torch.randn(16, 10, generator=gen).softmax(-1)
    target = torch.randint(0, 10, (16,), generator=gen)
    for name in sorted(n for n in vars(metrics) if not n.startswith("_") and "metrics" in groups):
        cls = getattr(metrics, name)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
            continue

        def update(cls=cls):
            metric = cls(**required(cls.__init__, FILL))
            return CallWith(metric, lambda m, p, t: m.update(p, t))

        def compute(cls=cls):
            metric = cls(**required(cls.__init__, FILL))
            metric.update(probs, target)
            return CallWith(metric, lambda m: m.compute())

        out += [(f"{name} update", update, (probs, target)), (f"{name} compute", compute, ())]
    return out


def _out_of_time(_signum, _frame):
    raise TimeoutError(f"over {LIMIT_S} s")


def run(label, fn, args, breaks, kwargs=None):
    """`compile_run`, with no sites for a call that failed: the rule drops an entry whose call fails
    on its inputs (a misuse, such as a wrong embedding size, is no break of the entry). A call that
    compiles for more than `LIMIT_S` seconds is stopped and fails too (the Bayesian models re-sample
    their weights by assigning module attributes, and dynamo retraced them for over ten minutes)."""
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.alarm(LIMIT_S)
    try:
        row, sites = compile_run(
            label,
            fn,
            args,
            breaks,
            lambda path: package_site(path, PACKAGES, "precision_untuned18_probes.py"),
            kwargs,
        )
    finally:
        signal.alarm(0)
    return row, [] if "compile ERROR" in row else sites


if __name__ == "__main__":
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    write_sites(out, probe_rows(runs(), run, PACKAGES, breaks, build=True))
