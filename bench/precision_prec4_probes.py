"""Dynamo checks behind branch prec4's precision fixes (issue 11), on torch 2.13 CPU.

    PYTHONPATH=. python bench/precision_prec4_probes.py [--smp DIR] [--transformers]

- F3, numpy `.tolist()`: an `isinstance(p, np.ndarray)` branch breaks when `p` is an array (dynamo
  traces numpy as tensors), and is dead when the path hands `p` a tensor; numpy made inside the
  compiled code from Python numbers also breaks on `.tolist()`.
- FL107 over a class dim: `for cls in range(num_classes)`, `num_classes = y_pred.size(1)`: one
  graph whose size follows the class count, not the batch (a pattern copy; with `--smp DIR`, a
  folder holding segmentation_models_pytorch 0.6.0's source, its real FocalLoss too).
- F2, with `--transformers`: HubertModel in training with SpecAugment: `_compute_mask_indices`'s
  `attention_mask...tolist()` arm is not a break site (forward never hands it a mask).

Each row: the call, the graphs dynamo made and their op counts, and the break sites.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import numpy as np
import torch
import torch._dynamo
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from break_probe import break_sites, counting_compile, listen  # noqa: E402


def numpy_branch(x, p):
    if isinstance(p, np.ndarray):
        a, b = np.round(p).astype(int).tolist()
    else:
        a, b = p.float().round().int().tolist()
    return x + a + b


def numpy_of_numbers(x):
    p = np.array([1.2, x.shape[0] + 0.5])
    a, b = np.round(p).astype(int).tolist()
    return x + a + b


def class_loop(y_pred, y_true):
    num_classes = y_pred.size(1)
    total = 0
    for cls in range(num_classes):
        total = total + F.binary_cross_entropy_with_logits(y_pred[:, cls, ...], (y_true == cls).float())
    return total


def run(handler, label: str, fn, *args) -> None:
    compiled, graphs = counting_compile(fn, handler, dynamic=False)
    compiled(*args)
    sites = break_sites(handler.texts, lambda f: Path(f).name if "site-packages/torch" not in f else None)
    print(f"| {label} | {len(graphs)}, {sum(graphs)} | {'; '.join(sites) or '-'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smp", help="folder holding segmentation_models_pytorch 0.6.0's source")
    parser.add_argument(
        "--transformers", action="store_true", help="also run HubertModel (installed transformers)"
    )
    args = parser.parse_args()
    handler = listen()
    print("| call | graphs, ops | break sites |\n|---|---|---|")
    run(handler, "numpy_branch, p an array", numpy_branch, torch.ones(2), np.array([1.2, 2.7]))
    run(handler, "numpy_branch, p a tensor", numpy_branch, torch.ones(2), torch.tensor([1.2, 2.7]))
    run(handler, "numpy_of_numbers", numpy_of_numbers, torch.ones(2))
    for batch, classes in ((2, 4), (4, 4), (2, 6)):
        y_pred, y_true = torch.randn(batch, classes, 8, 8), torch.randint(0, classes, (batch, 8, 8))
        run(handler, f"class_loop, batch {batch}, {classes} classes", class_loop, y_pred, y_true)
    if args.smp:
        package = types.ModuleType("segmentation_models_pytorch")  # its __init__ imports timm
        package.__path__ = [str(Path(args.smp) / "segmentation_models_pytorch")]
        sys.modules["segmentation_models_pytorch"] = package
        from segmentation_models_pytorch.losses.focal import FocalLoss

        for batch, classes in ((2, 4), (4, 4), (2, 6)):
            y_pred, y_true = torch.randn(batch, classes, 8, 8), torch.randint(0, classes, (batch, 8, 8))
            run(
                handler,
                f"smp FocalLoss(multiclass), batch {batch}, {classes} classes",
                FocalLoss("multiclass"),
                y_pred,
                y_true,
            )
    if args.transformers:
        from transformers import HubertConfig, HubertModel

        config = HubertConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2, mask_time_prob=0.5, mask_time_length=2,
        )  # fmt: skip
        torch.manual_seed(0)
        model = HubertModel(config).train()
        mask = torch.ones(2, 4000, dtype=torch.long)
        run(handler, "HubertModel, train, SpecAugment, attention_mask", model, torch.randn(2, 4000), mask)


if __name__ == "__main__":
    main()
