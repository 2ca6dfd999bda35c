"""Dynamo checks behind the verdicts of the second part of bench/results/precision_untuned31.md (prec31,
issue 11): pytorch_tabular 1.2.0's activations and `ModuleWithInit` loaded from their files (they import
only torch), and few-line reproductions of the sampled lines where the package needs more (torch 2.13
CPU, backend eager, dynamic=False).

    cd bench && PYTHONPATH=$PWD/..:$PWD PROBE_VENV/bin/python untuned31b_probes.py SITE

SITE is the folder holding the unzipped wheels; PROBE_VENV has torch 2.13 and scipy.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import torch
from break_probe import print_probes
from torch import nn

SCRIPT = "untuned31b_probes.py"
PACKAGES = ("pytorch_tabular", "denoising_diffusion_pytorch")


def load(site: Path, relative: str):
    spec = importlib.util.spec_from_file_location(Path(relative).stem, site / relative)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def noise_assignment(x_start, noise):
    """#1 (`denoising_diffusion_pytorch.py:772`): immiscible diffusion's assignment on the host."""
    from scipy.optimize import linear_sum_assignment

    dist = torch.cdist(x_start.flatten(1), noise.flatten(1))
    _, assign = linear_sum_assignment(dist.cpu())
    return noise[torch.from_numpy(assign).to(dist.device)]


def self_condition(x):
    """#2-#6: `if self.self_condition and random() < 0.5:` in the training losses."""
    if random.random() < 0.5:
        return x * 2
    return x


class FeatureImportance(nn.Module):
    """#12 (`ft_transformer.py:94`): the importances stored on the module as a numpy array each forward."""

    def forward(self, x):
        self.feature_importance_ = x.mean(dim=0).detach().cpu().numpy()
        return x + 1


def main() -> None:
    site = Path(sys.argv[1])
    activations = load(site, "pytorch_tabular/models/common/layers/activations.py")
    misc = load(site, "pytorch_tabular/models/common/layers/misc.py")

    class Initialised(misc.ModuleWithInit):
        def initialize(self, x):
            pass

        def forward(self, x):
            return x * 2

    scores = torch.randn(4, 16)
    runs = [
        ("immiscible noise assignment", noise_assignment, (torch.randn(4, 3, 2), torch.randn(4, 3, 2))),
        ("self-conditioning draw", self_condition, (torch.ones(2),)),
        ("pytorch_tabular Sparsemax, k=None (default)", activations.Sparsemax(dim=-1), (scores,)),
        ("pytorch_tabular Sparsemax, k=2", activations.Sparsemax(dim=-1, k=2), (scores,)),
        ("pytorch_tabular Entmax15, k=2", activations.Entmax15(dim=-1, k=2), (scores,)),
        ("pytorch_tabular ModuleWithInit, first call", Initialised(), (torch.ones(2),)),
        ("FT-Transformer feature importance as numpy", FeatureImportance(), (torch.randn(4, 3),)),
    ]
    print_probes(runs, SCRIPT, PACKAGES)


if __name__ == "__main__":
    main()
