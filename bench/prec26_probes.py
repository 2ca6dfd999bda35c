"""Dynamo checks behind the verdicts of the third sample (seed 26) of
bench/results/real_breaks_precision.md (prec26j, issue 11): each probe reproduces the code pattern of
one sampled finding in a few lines and compiles it (torch 2.13 CPU, backend eager, dynamic=False) on
the input a normal call gives and, where the verdict turns on it, on the input of the other path.
A row prints the graphs, their op count and the lines of this file where dynamo logged a break.

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec26_probes.py

Needs the corpus packages diffusers (the DEIS row) and transformers (the rt_detr_v2 row).
"""

from __future__ import annotations

import numpy as np
import torch
from break_probe import print_probes
from torch import nn

SCRIPT = "prec26_probes.py"


class FeatureEncoder(nn.Module):
    """Sample 9 (wav2vec2_conformer:320): the feature encoder makes its input view require grad when
    training (for gradient checkpointing) unless the encoder is frozen."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3)
        self._requires_grad = True

    def forward(self, input_values):
        hidden_states = input_values[:, None]
        if self._requires_grad and self.training:
            hidden_states.requires_grad = True
        return self.conv(hidden_states)


class PositionBias(nn.Module):
    """Sample 42 (switch_transformers:432): a layer without relative attention bias builds a zero
    position bias and, when training with gradient checkpointing, makes it require grad."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.gradient_checkpointing = True

    def forward(self, hidden_states):
        length = hidden_states.shape[1]
        position_bias = torch.zeros((1, 1, length, length), dtype=hidden_states.dtype)
        if self.gradient_checkpointing and self.training:
            position_bias.requires_grad = True
        query = self.q(hidden_states)
        return torch.softmax(query @ query.transpose(1, 2) + position_bias[0], dim=-1)


def deis_third_order(sigmas, sample):
    """Sample 22 (DEIS `multistep_deis_third_order_update`, solver_order=3): `np.log` of 0-d CPU
    sigma tensors in the nested `ind_fn`."""
    rho_t, rho_s0, rho_s1, rho_s2 = sigmas[3], sigmas[2], sigmas[1], sigmas[0]

    def ind_fn(t, b, c, d):
        numerator = t * (
            np.log(c) * (np.log(d) - np.log(t) + 1)
            - np.log(d) * np.log(t)
            + np.log(d)
            + np.log(t) ** 2
            - 2 * np.log(t)
            + 2
        )
        denominator = (np.log(b) - np.log(c)) * (np.log(b) - np.log(d))
        return numerator / denominator

    coef = ind_fn(rho_t, rho_s0, rho_s1, rho_s2) - ind_fn(rho_s0, rho_s0, rho_s1, rho_s2)
    return sample * coef


def randn_tensor(shape, generator, sample):
    """Sample 31 (diffusers `randn_tensor`, torch_utils.py:110): `torch.randn(..., generator=...)`
    with the pipeline's `generator` argument."""
    latents = torch.randn(shape, generator=generator, dtype=sample.dtype)
    return latents + sample


def ransac_body(batch, max_samples, drawn, x):
    """Sample 45 (kornia `_ransac_program.py:280`): `.item()` of the batch size in the body of the
    program kornia compiles (fullgraph) under its `_dynamo_config()`, `capture_scalar_outputs=True`;
    run under that setting and under the default."""
    current = torch.minimum(batch, max_samples - drawn)
    size = current.item()
    torch._check(size >= 1)
    return x.new_zeros(size) + x.sum()


def truncation_check(text_input_ids, untruncated_ids):
    """Sample 44 (lumina `encode_prompt`): ids padded to the longest prompt rounded up to a multiple
    of 8 (`pad_to_multiple_of=8`); the untruncated ids to the longest prompt."""
    if untruncated_ids.shape[-1] >= text_input_ids.shape[-1] and not torch.equal(
        text_input_ids, untruncated_ids
    ):
        return text_input_ids + 1
    return text_input_ids


def keyframe_coords(condition_latents, coords):
    """Sample 35 (ltx2 DFR `_prepare_keyframe_coords`): `num_pixel_frames` unpacked from a list of
    `(int, tensor, float, int)` condition tuples, compared with 1."""
    out = []
    for pixel_frame_idx, encoded, strength, num_pixel_frames in condition_latents:
        coords = coords + pixel_frame_idx
        if num_pixel_frames == 1:
            coords = coords.clone()
            coords[..., 1:] = coords[..., :1] + 1
        out.append(encoded.sum() * strength + coords)
    return out


def deis_scheduler_update():
    """Sample 22 on diffusers' own `DEISMultistepScheduler(solver_order=3)`: three eager steps fill
    its model outputs, then the third-order update is what the probe compiles."""
    from diffusers import DEISMultistepScheduler

    torch.manual_seed(0)
    scheduler = DEISMultistepScheduler(solver_order=3, lower_order_final=False)
    scheduler.set_timesteps(10)
    sample = torch.randn(1, 4, 8, 8)
    for step in range(3):
        sample = scheduler.step(torch.randn(1, 4, 8, 8), scheduler.timesteps[step], sample).prev_sample
    scheduler.model_outputs[-1] = scheduler.convert_model_output(torch.randn(1, 4, 8, 8), sample=sample)
    outputs = scheduler.model_outputs
    return lambda x: scheduler.multistep_deis_third_order_update(outputs, sample=x), (sample,)


def deformable_attention():
    """Sample 20 (rt_detr_v2 `multi_scale_deformable_attention_v2`, modular:238, generated into
    modeling:73): `value_spatial_shapes` is annotated `Tensor`, but the attention module passes
    `spatial_shapes_list`, a list of int (height, width) tuples."""
    from transformers.models.rt_detr_v2.modeling_rt_detr_v2 import multi_scale_deformable_attention_v2

    shapes, heads, dim, queries, points = [(8, 8), (4, 4), (2, 2)], 2, 4, 5, 4
    value = torch.randn(1, sum(h * w for h, w in shapes), heads, dim)
    locations = torch.rand(1, queries, heads, len(shapes) * points, 2)
    weights = torch.rand(1, queries, heads, len(shapes) * points)

    def run(value, locations, weights):
        return multi_scale_deformable_attention_v2(value, shapes, locations, weights, [points] * len(shapes))

    return run, (value, locations, weights)


def cases() -> list:
    sigmas = torch.tensor([0.9, 0.7, 0.5, 0.3]).unbind()  # 0-d CPU tensors, as DEIS's self.sigmas[i]
    sample = torch.randn(2, 3)
    steps = (torch.tensor(4), torch.tensor(10), torch.tensor(0), torch.randn(3))
    conditions = [(0, torch.randn(1, 2), 1.0, 9), (8, torch.randn(1, 2), 0.5, 1)]
    return [
        ("train requires_grad on the input view", FeatureEncoder(), (torch.randn(2, 16),)),
        ("eval requires_grad on the input view (branch not taken)", FeatureEncoder(), (torch.randn(2, 16),)),
        ("train requires_grad on a zero position bias", PositionBias(), (torch.randn(2, 5, 8),)),
        ("DEIS third order, np.log of 0-d sigma tensors", deis_third_order, (sigmas, sample)),
        ("diffusers DEISMultistepScheduler(solver_order=3), third-order update", *deis_scheduler_update()),
        ("randn with a torch.Generator", randn_tensor, ((2, 3), torch.Generator().manual_seed(0), sample)),
        ("randn with generator None", randn_tensor, ((2, 3), None, sample)),
        ("RANSAC body .item(), default settings", ransac_body, steps),
        (
            "truncation check, 16 tokens (a multiple of 8)",
            truncation_check,
            (torch.ones(1, 16, dtype=torch.long), torch.ones(1, 16, dtype=torch.long)),
        ),
        (
            "truncation check, 13 tokens (ids padded to 16)",
            truncation_check,
            (torch.ones(1, 16, dtype=torch.long), torch.ones(1, 13, dtype=torch.long)),
        ),
        ("keyframe coords, int num_pixel_frames", keyframe_coords, (conditions, torch.zeros(3, 4, 2))),
        ("rt_detr_v2 deformable attention, spatial shapes as int tuples", *deformable_attention()),
    ]


def captured_cases() -> list:
    """Run under kornia's setting (`torch._dynamo.config.capture_scalar_outputs = True`)."""
    steps = (torch.tensor(4), torch.tensor(10), torch.tensor(0), torch.randn(3))
    return [("RANSAC body .item(), capture_scalar_outputs=True", ransac_body, steps)]


if __name__ == "__main__":
    print_probes(cases(), SCRIPT)
    print("\nUnder `torch._dynamo.config.patch(capture_scalar_outputs=True)`, as kornia's RANSAC program:\n")
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        print_probes(captured_cases(), SCRIPT)
