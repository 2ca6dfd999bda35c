"""Dynamo checks behind the verdicts of the fourth sample (seed 27) of
bench/results/real_breaks_precision.md (prec27j, issue 11): each probe compiles the installed package
code of one sampled finding, or a few-line reproduction of its pattern, (torch 2.13 CPU, backend eager,
dynamic=False) on the input a normal call gives and, where the verdict turns on it, on the input of the
other path. A row prints the graphs, their op count and the lines where dynamo logged a break (in the
package, or "probes:N" for a line of this file).

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec27_probes.py

Needs the corpus packages kornia, torch_geometric and diffusers.
"""

from __future__ import annotations

import numpy as np
import torch
from break_probe import print_probes

SCRIPT = "prec27_probes.py"
PACKAGES = ("kornia", "torch_geometric", "diffusers")


def distance_transform():
    """Sample 30 (kornia `distance_transform.py:173`): the cascade reads `bool(mask.any())` only at
    the rounds of `stop_checks`, which `_can_stop_cascade` leaves empty under `is_compiling()`."""
    from kornia.contrib import distance_transform as run

    image = torch.zeros(1, 1, 24, 24)
    image[..., 12, 12] = 1.0
    return run, (image,)


def cascade_with_stop_checks(image):
    """Sample 30 with the guard removed: the same read at rounds 8 and 16 of 16."""
    out = torch.zeros_like(image)
    stop_checks = range(8, 17, 8)
    for i in range(16):
        mask = image > i / 16
        if i + 1 in stop_checks and not bool(mask.any()):
            break
        out = out + mask.to(out.dtype)
    return out


def to_dense_adj_case(max_num_nodes):
    """Sample 26 (torch_geometric `_to_dense_adj.py:86`): `idx2[mask]` sits in the branch taken only
    when `max_num_nodes` is given and an edge points past it; ProteinMPNN (the path the finding names)
    and the package's own callers pass none, or the node count."""
    from torch_geometric.utils import to_dense_adj

    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 0, 3, 4, 2]])
    batch = torch.tensor([0, 0, 1, 1, 1])
    return lambda e, b: to_dense_adj(e, b, max_num_nodes=max_num_nodes), (edge_index, batch)


def onnx_img2img_noise():
    """Sample 10 (diffusers `pipeline_onnx_stable_diffusion_img2img.py:471`): the noised latents come
    back from `scheduler.add_noise` on `torch.from_numpy` arrays (CPU) and go on as numpy arrays, as
    in the ONNX pipeline (PNDM, its default scheduler)."""
    from diffusers import PNDMScheduler

    scheduler = PNDMScheduler(skip_prk_steps=True)
    scheduler.set_timesteps(10)

    def noise(init_latents, noise, timesteps):
        init_latents = scheduler.add_noise(
            torch.from_numpy(init_latents), torch.from_numpy(noise), torch.from_numpy(timesteps)
        )
        init_latents = init_latents.numpy()
        latent_model_input = np.concatenate([init_latents] * 2)
        return torch.from_numpy(latent_model_input) * 2

    rng = np.random.default_rng(0)
    latents = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    return noise, (
        latents,
        rng.standard_normal(latents.shape).astype(np.float32),
        np.array([scheduler.timesteps[3]]),
    )


def multinomial(probs, generator):
    """Sample 44 (diffusers `scheduling_discrete_ddim.py:120`): `torch.multinomial(...,
    generator=generator)` with the pipeline's `generator` when `temperature > 0`."""
    return torch.multinomial(probs, num_samples=1, generator=generator) + 1


def cases() -> list:
    probs = torch.softmax(torch.randn(4, 6), dim=-1)
    return [
        ("kornia distance_transform (stop checks off under compile)", *distance_transform()),
        (
            "distance cascade with stop checks at rounds 8, 16",
            cascade_with_stop_checks,
            (torch.rand(1, 1, 8, 8),),
        ),
        ("torch_geometric to_dense_adj, max_num_nodes None", *to_dense_adj_case(None)),
        ("torch_geometric to_dense_adj, max_num_nodes 2 (edges past it)", *to_dense_adj_case(2)),
        ("ONNX img2img noised latents to numpy (CPU)", *onnx_img2img_noise()),
        ("multinomial with a torch.Generator", multinomial, (probs, torch.Generator().manual_seed(0))),
        ("multinomial with generator None", multinomial, (probs, None)),
    ]


if __name__ == "__main__":
    print_probes(cases(), SCRIPT, PACKAGES)
