"""Dynamo checks behind the verdicts of the second sample (seed 25) of
bench/results/real_breaks_precision.md (prec25, issue 11): each probe reproduces the code pattern of
one or more sampled findings in a few lines and compiles it (torch 2.13 CPU, backend eager,
dynamic=False) on the input a normal call gives. A row prints the graphs, their op count and the
lines of this file where dynamo logged a break. Needs transformers (its logger's `warning_once`).

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec25_probes.py
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from break_probe import print_probes
from transformers.utils import logging as hf_logging

SCRIPT = "prec25_probes.py"
hf_logger = hf_logging.get_logger("prec25")


def pooled_from_embeds(logits, input_ids):
    """Samples 2 and 48 (openai, bloom ForSequenceClassification): with `inputs_embeds` and a pad
    token, the model warns once that it cannot find the padding."""
    if input_ids is not None:
        last = (input_ids != 0).int().argmax(-1)
    else:
        last = -1
        hf_logger.warning_once("will not detect padding tokens in `inputs_embeds`")
    return logits[torch.arange(logits.shape[0]), last]


def karras_sigma_max(in_sigmas, x):
    """Sample 5 (UniPC `_convert_to_karras`): `.item()` on a row of a numpy array of sigmas."""
    sigma_max = in_sigmas[0].item()
    return x * sigma_max


class Scheduler:
    def __init__(self) -> None:
        self.timesteps = torch.arange(10)
        self.step_index = None


def scheduler_copies(scheduler, x, frames: int):
    """Sample 37 (skyreels_v2 v2v pipeline:937): one `deepcopy(self.scheduler)` per latent frame."""
    copies = [copy.deepcopy(scheduler) for _ in range(frames)]
    return x * len(copies)


def aux_outputs(binaries_masks, classes):
    """Sample 22 (maskformer:1914): `zip` over the leading (decoder-layer) dim of two stacked tensors."""
    out = []
    for aux_binary_masks, aux_classes in zip(binaries_masks[:-1], classes[:-1]):  # noqa: B905 (the code as sampled)
        out.append(aux_binary_masks.sum() + aux_classes.sum())
    return out


def scale_factor(height, width):
    """Sample 20 (kandinsky5 i2v `_get_scale_factor`): a chained comparison on int pixel sizes."""

    def between_480p(x):
        return 480 <= x <= 854

    if between_480p(height) and between_480p(width):
        return (1, 2, 2)
    return (1, 3.16, 3.16)


def scale_factor_call(x):
    return x * scale_factor(512, 768)[1]


def ensemble_cost(depth_aligned):
    """Sample 13 (marigold depth `cost_fn`): a loop over the pairs of ensemble members, then `.item()`."""
    cost = 0.0
    for i, j in torch.combinations(torch.arange(depth_aligned.shape[0])):
        diff = depth_aligned[i] - depth_aligned[j]
        cost += (diff**2).mean().sqrt().item()
    return cost


def ensemble_pairs(depth_aligned):
    """Sample 13 without the `.item()`: the loop alone."""
    cost = depth_aligned.new_zeros(())
    for i, j in torch.combinations(torch.arange(depth_aligned.shape[0])):
        cost = cost + ((depth_aligned[i] - depth_aligned[j]) ** 2).mean()
    return cost


def cases() -> list:
    logits = torch.randn(2, 5, 3)
    x = torch.randn(2, 4)
    stacked = torch.randn(6, 2, 3, 4)
    return [
        ("warning_once, input_ids given", pooled_from_embeds, (logits, torch.ones(2, 5, dtype=torch.long))),
        ("warning_once, inputs_embeds (input_ids None)", pooled_from_embeds, (logits, None)),
        ("numpy .item() (karras sigma_max)", karras_sigma_max, (np.linspace(14.6, 0.03, 10), x)),
        ("deepcopy of a scheduler", lambda x: scheduler_copies(Scheduler(), x, 3), (x,)),
        ("zip over 6 stacked decoder layers", aux_outputs, (stacked, torch.randn(6, 2, 5))),
        ("chained comparison on int height/width", scale_factor_call, (x,)),
        ("marigold pairs loop with .item(), ensemble 3", ensemble_cost, (torch.randn(3, 1, 4, 4),)),
        ("marigold pairs loop alone, ensemble 3", ensemble_pairs, (torch.randn(3, 1, 4, 4),)),
        ("marigold pairs loop alone, ensemble 5", ensemble_pairs, (torch.randn(5, 1, 4, 4),)),
    ]


if __name__ == "__main__":
    print_probes(cases(), SCRIPT)
