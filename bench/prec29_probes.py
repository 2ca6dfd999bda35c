"""Dynamo checks behind the verdicts of the sixth sample (seed 29) of
bench/results/real_breaks_precision.md (prec30, issue 11): each probe compiles the installed package
code of one sampled finding, or a few-line reproduction of its pattern, (torch 2.13 CPU, backend eager,
dynamic=False) on the input a normal call gives and, where the verdict turns on it, on the input of the
other path. A row prints the graphs, their op count and the lines where dynamo logged a break (in the
package, or "probes:N" for a line of this file).

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec29_probes.py

Needs the corpus packages diffusers, kornia, torch_geometric and transformers.
"""

from __future__ import annotations

import torch
from break_probe import compile_run, listen, package_site, probe_header

SCRIPT = "prec29_probes.py"
PACKAGES = ("diffusers", "kornia", "torch_geometric", "transformers")


def seven_point_models():
    """Sample 13 (kornia `_ransac_program.py:164`): `_minimal_models("fundamental_7pt", ...)` on CPU
    points, where `compact` keeps the finite models by a boolean mask; kornia compiles it inside
    `build_lm_program` under its own `_dynamo_config()` (`capture_dynamic_output_shape_ops=True`)."""
    from kornia.geometry._ransac_program import _minimal_models

    generator = torch.Generator().manual_seed(0)
    x1 = torch.cat([torch.rand(3, 7, 2, generator=generator), torch.ones(3, 7, 1)], -1)
    x2 = torch.cat([torch.rand(3, 7, 2, generator=generator), torch.ones(3, 7, 1)], -1)
    return lambda a, b: _minimal_models("fundamental_7pt", a, b), (x1, x2)


def adain(channels: int):
    """Sample 37 (diffusers `ltx2/pipeline_ltx2_latent_upsample.py:187`): `adain_filter_latent` (it reads
    nothing of `self`), the loop over the latent channels inside the loop over the batch, with
    `adain_factor > 0` (an option, default 0.0)."""
    from diffusers.pipelines.ltx2.pipeline_ltx2_latent_upsample import LTX2LatentUpsamplePipeline

    latents = torch.randn(1, channels, 2, 4, 4)
    return lambda x, ref: LTX2LatentUpsamplePipeline.adain_filter_latent(None, x, ref, 1.0), (
        latents,
        latents * 2,
    )


def contains_loop(x, batch):
    """Sample 18 (torch_geometric `llm/models/g_retriever.py:157`): `xs[i] if i in batch_unique` when some
    questions have no node (the branch of `len(batch_unique) < batch_size`)."""
    batch_unique = batch.unique()
    xs = list(x.split(1, dim=0))
    return [xs[i] * 2 if i in batch_unique else None for i in range(3)]


def unet3d():
    """Sample 34 (diffusers `unets/unet_3d_condition.py:538`): a tiny `UNet3DConditionModel` (one upsampler,
    factor 2), on a latent whose size is a multiple of the factor and on one that is not."""
    from diffusers import UNet3DConditionModel

    model = UNet3DConditionModel(
        block_out_channels=(32, 32),
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
        up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
        layers_per_block=1,
        cross_attention_dim=16,
        attention_head_dim=8,
        norm_num_groups=8,
    ).eval()
    text = torch.randn(1, 3, 16)
    return model, lambda size: (torch.randn(1, 4, 2, size, size), torch.tensor(10), text)


def labels_check(logits, labels):
    """Sample 29 (transformers `data2vec/modeling_data2vec_audio.py:843`): the CTC loss's label check, whose
    test runs on every call with labels (its branch raises)."""
    if labels is not None and labels.max() >= 32:
        raise ValueError("Label values must be <= vocab_size")
    return logits.log_softmax(-1).sum()


def runs() -> list:
    model, unet_args = unet3d()
    batch = torch.tensor([0, 0, 2])
    return [
        ("kornia _minimal_models fundamental_7pt, CPU, default dynamo config", *seven_point_models()),
        ("ltx2 adain_filter_latent, 8 channels", *adain(8)),
        ("ltx2 adain_filter_latent, 16 channels", *adain(16)),
        ("g_retriever `i in batch_unique`, question 1 without nodes", contains_loop, (torch.randn(3, 4), batch)),
        ("tiny UNet3DConditionModel, latent 8x8 (a multiple of 2)", model, unet_args(8)),
        ("tiny UNet3DConditionModel, latent 9x9", model, unet_args(9)),
        ("data2vec-audio label check, labels given", labels_check, (torch.randn(2, 5, 32), torch.randint(0, 32, (2, 5)))),
    ]  # fmt: skip


def main() -> None:
    from kornia.geometry._ransac_program import _dynamo_config

    breaks = listen()
    user = lambda path: package_site(path, PACKAGES, SCRIPT)  # noqa: E731
    probe_header()
    for label, fn, args in runs():
        print(compile_run(label, fn, args, breaks, user)[0], flush=True)
    label = "kornia _minimal_models fundamental_7pt, CPU, under kornia's _dynamo_config()"
    with _dynamo_config():
        print(compile_run(label, *seven_point_models(), breaks, user)[0], flush=True)


if __name__ == "__main__":
    main()
