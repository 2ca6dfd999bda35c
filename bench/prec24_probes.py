"""Dynamo checks behind the verdicts of bench/results/real_breaks_precision.md (prec24, issue 11):
each probe reproduces the code pattern of one or more sampled findings in a few lines and compiles
it (torch 2.13 CPU, backend eager, dynamic=False) on the input a normal call gives and, where the
verdict turns on it, on the input of the other path. A row prints the graphs, their op count and
the lines of this file where dynamo logged a break.

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec24_probes.py
"""

from __future__ import annotations

import logging

import torch
from break_probe import print_probes
from torch import nn

SCRIPT = "prec24_probes.py"
logger = logging.getLogger("prec24")


def truncation_check(text_input_ids, untruncated_ids):
    """Samples 9, 13, 20, 48 (diffusers `_get_t5_prompt_embeds` and kin): `torch.equal` is reached
    only when the untruncated ids are at least as long as the padded ones."""
    if untruncated_ids.shape[-1] >= text_input_ids.shape[-1] and not torch.equal(
        text_input_ids, untruncated_ids
    ):
        return text_input_ids + 1
    return text_input_ids


def postprocess_numpy(image):
    """Sample 17 (deepfloyd_if): the image copied to numpy at the end of a pipeline call."""
    image = (image / 2 + 0.5).clamp(0, 1)
    return image.cpu().permute(0, 2, 3, 1).float().numpy()


class Pyramid(nn.Module):
    def __init__(self, n_levels: int = 3) -> None:
        super().__init__()
        self.n_levels = n_levels


class GuardedAttributeItem(nn.Module):
    """Sample 37 (kornia scale_space_detector.py:617): `.item()` under `isinstance(..., Tensor)` on
    an attribute chain that kornia always sets to a Python int."""

    def __init__(self) -> None:
        super().__init__()
        self.scale_pyr = Pyramid(3)

    def forward(self, x):
        if isinstance(self.scale_pyr.n_levels, torch.Tensor):
            num_levels = int(self.scale_pyr.n_levels.item())
        else:
            num_levels = self.scale_pyr.n_levels
        return x * num_levels


class LayerDrop(nn.Module):
    """Sample 19 (sew modular_sew.py:208): `skip_the_layer` is False in eval, a 0-d tensor in training."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            skip_the_layer = False
            if self.training:
                skip_the_layer = torch.rand([]) < 0.1
            if not skip_the_layer or False:
                x = layer(x)
        return x


def arange_of_tensor_length(seqlens):
    """Sample 40 (qwen2_5_omni get_rope_index): `torch.arange` of a length read from a tensor."""
    audio_len = ((seqlens[0] - 1) // 2 + 1 - 2) // 2 + 1
    return torch.arange(audio_len).view(1, -1).expand(3, -1) + 1


def text_len_after_tensor_start(st, x):
    """Sample 43 (qwen2_5_omni modeling 393): `st` is 0 on the first segment, a 0-d tensor after an
    image or audio segment (`st += ... + image_len`, with `image_len` from `image_grid_thw`)."""
    text_len = 7 - st - 1
    if text_len != 0:
        return x + 1
    return x


def karras_step(schedule, timesteps, x):
    """Sample 29 (stochastic_karras_ve pipeline:90): `t` runs over a tensor of timesteps."""
    for t in timesteps:
        sigma_prev = schedule[t - 1] if t > 0 else 0
        x = x * sigma_prev
    return x


def rope_seq_len(position_ids, x, rope_type):
    """Sample 47 (phimoe modular_phimoe.py:58): the tensor `seq_len` is tested only for a rope type
    other than "default" (Phi-3.5-MoE's checkpoint uses "longrope")."""
    seq_len = torch.max(position_ids) + 1
    if rope_type != "default" and seq_len:
        return x * 2
    return x


def refinement_log(x):
    """Sample 49 (attend_and_excite): `logger.info` of a loss inside the refinement step."""
    loss = x.sum()
    logger.info(f"\t Finished with loss of: {loss}")
    return loss


def cases() -> list:
    ids = torch.arange(12).view(1, 12)
    short = torch.arange(5).view(1, 5)
    longer = torch.arange(15).view(1, 15)
    x = torch.randn(2, 4)
    return [
        ("truncation check, short prompt (ids padded to max_length)", truncation_check, (ids, short)),
        ("truncation check, prompt longer than max_length", truncation_check, (ids, longer)),
        ("truncation check, ids padded to longest (always compared)", truncation_check, (short, short)),
        ("image to numpy", postprocess_numpy, (torch.randn(1, 3, 4, 4),)),
        ("guarded .item() on an int attribute", GuardedAttributeItem(), (x,)),
        ("eval LayerDrop", LayerDrop(), (x,)),
        ("train LayerDrop", LayerDrop(), (x,)),
        ("torch.arange of a tensor length", arange_of_tensor_length, (torch.tensor([40]),)),
        ("text_len with st = 0 (first segment)", lambda x: text_len_after_tensor_start(0, x), (x,)),
        (
            "text_len with st a 0-d tensor (after an image)",
            lambda st, x: text_len_after_tensor_start(st, x),
            (torch.tensor(3), x),
        ),
        ("karras timesteps", karras_step, (torch.rand(4), torch.arange(3, -1, -1), x)),
        ("rope seq_len, rope_type default", lambda p, x: rope_seq_len(p, x, "default"), (ids, x)),
        ("rope seq_len, rope_type longrope", lambda p, x: rope_seq_len(p, x, "longrope"), (ids, x)),
        ("logger.info of a loss", refinement_log, (x,)),
    ]


if __name__ == "__main__":
    print_probes(cases(), SCRIPT)
