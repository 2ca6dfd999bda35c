"""A corpus of real models from public packages that break torch.compile, and its ground truth.

Not a test: needs transformers, torch_geometric, diffusers, fair-esm and kornia, which fuselint does
not depend on. (torchvision's detection models belong here too, but its PyPI wheel needs CUDA
torch libraries, and the development machines have the CPU torch wheel only.) Models that compile
without a break are left out: Mixtral, Funnel and DPM-Solver's step on torch 2.13, and in diffusers
0.42.1, at tiny configs, the UNet2D(Condition) (with and without a text mask), SDXL, 3D, motion and
SVD UNets, DiT, PixArt, SD3, Flux, QwenImage, HunyuanDiT, HunyuanVideo, Sana, AuraFlow, Wan,
CogVideoX, LTX, CogView4, StableAudio and Prior transformers, ControlNet, six VAEs (KL, Tiny, VQ,
Wan, CogVideoX, Oobleck) and the DPM++, UniPC, Heun, KDPM2, KDPM2-ancestral, DEIS, DPM single-step,
IPNDM, EDM-DPM and flow-match Euler schedulers' `step`. Every model is built from a tiny config with random weights
(seeded), so nothing is downloaded. Ground truth comes from dynamo itself, not from fuselint:
each model runs under `torch.compile(backend=<a recorder>)` in its own process with dynamo's
graph-break log captured, and a break *site* is the innermost frame of the break's user
traceback that lies in the model's package (a break dynamo reports inside `copy.py` or torch is
the package line that called it). `bench/real_breaks.py` scores static recall against these
sites; `bench/fix_rate.py` fixes a copy of the packages and counts what is left.

    PYTHONPATH=. python bench/real_corpus.py MODEL            # one model's sites, as JSON
    PYTHONPATH=. python bench/real_corpus.py --list
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve()

# ---------------------------------------------------------------- model factories
# Each returns (model, args). Models are built under torch.manual_seed(0), inputs too, so two
# processes (original and fixed source) build the same weights and feed the same data. `scale`
# (1: the tiny default) multiplies widths and, where the break structure allows, batch or size;
# the layer counts and sequence lengths that choose a model's code path stay as they are.


def _ids(vocab: int, batch: int = 2, length: int = 32):
    import torch

    return torch.randint(0, vocab, (batch, length))


def hf_longformer(scale: int = 1):
    from transformers import LongformerConfig, LongformerModel

    config = LongformerConfig(
        vocab_size=100,
        hidden_size=32 * scale,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64 * scale,
        attention_window=[8, 8],
        max_position_embeddings=80,
    )
    return LongformerModel(config), (_ids(100, batch=2 * scale, length=32),)


def hf_big_bird(scale: int = 1):
    from transformers import BigBirdConfig, BigBirdModel

    config = BigBirdConfig(
        vocab_size=100,
        hidden_size=32 * scale,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64 * scale,
        attention_type="block_sparse",
        block_size=4,
        num_random_blocks=2,
        max_position_embeddings=128,
    )
    return BigBirdModel(config), (_ids(100, batch=2 * scale, length=64),)


def hf_reformer(scale: int = 1):
    from transformers import ReformerConfig, ReformerModel

    config = ReformerConfig(
        vocab_size=100,
        hidden_size=32 * scale,
        num_hidden_layers=2,
        num_attention_heads=2,
        feed_forward_size=64 * scale,
        attention_head_size=16 * scale,
        axial_pos_embds=False,
        max_position_embeddings=64,
        local_attn_chunk_length=8,
        lsh_attn_chunk_length=8,
        attn_layers=["local", "lsh"],
        is_decoder=False,
    )
    return ReformerModel(config), (_ids(100, batch=2 * scale, length=32),)


def _codebook(scale: int) -> dict:
    return {"codebook_size": 16, "codebook_dim": 16 * scale}


def hf_encodec(scale: int = 1):
    import torch
    from transformers import EncodecConfig, EncodecModel

    config = EncodecConfig(
        num_filters=4 * scale,
        hidden_size=16 * scale,
        **_codebook(scale),
        upsampling_ratios=[2, 2],
        num_residual_layers=1,
        target_bandwidths=[1.5],
        sampling_rate=800,
        chunk_length_s=None,
    )
    return EncodecModel(config), (torch.randn(scale, 1, 256),)


def hf_vits(scale: int = 1):
    from transformers import VitsConfig, VitsModel

    config = VitsConfig(
        vocab_size=40,
        hidden_size=16 * scale,
        num_hidden_layers=2,
        num_attention_heads=2,
        ffn_dim=32 * scale,
        flow_size=8 * scale,
        spectrogram_bins=9,
        upsample_initial_channel=16 * scale,
        upsample_rates=[2, 2],
        upsample_kernel_sizes=[4, 4],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]],
        prior_encoder_num_flows=1,
        posterior_encoder_num_wavenet_layers=1,
        duration_predictor_num_flows=1,
        duration_predictor_filter_channels=16 * scale,
        depth_separable_num_layers=1,
        layerdrop=0.1,
    )
    return VitsModel(config), (_ids(40, batch=1, length=8),)


def hf_qwen2_vl_vision(scale: int = 1):
    import torch
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

    config = Qwen2VLVisionConfig(
        depth=2,
        embed_dim=32 * scale,
        hidden_size=32 * scale,
        num_heads=2,
        mlp_ratio=2,
        patch_size=2,
        temporal_patch_size=2,
        spatial_merge_size=2,
        in_channels=3,
    )
    grid = torch.tensor([[1, 4, 4]])
    pixels = torch.randn(16, 3 * 2 * 2 * 2)
    return Qwen2VisionTransformerPretrainedModel._from_config(config), (pixels, grid)


def hf_switch(scale: int = 1):
    from transformers import SwitchTransformersConfig, SwitchTransformersEncoderModel

    config = SwitchTransformersConfig(
        vocab_size=100,
        d_model=32 * scale,
        d_kv=16 * scale,
        d_ff=64 * scale,
        num_layers=2,
        num_heads=2,
        num_experts=4,
        encoder_sparse_step=1,
        expert_capacity=8 * scale,
    )
    return SwitchTransformersEncoderModel(config), (_ids(100, batch=2 * scale, length=16),)


def pyg_gcn(scale: int = 1):
    import torch
    from torch_geometric.nn import GCN

    x = torch.randn(20 * scale, 8)
    edges = torch.randint(0, 20 * scale, (2, 60 * scale))
    return GCN(8, 16 * scale, num_layers=2, out_channels=4), (x, edges)


def pyg_gat(scale: int = 1):
    import torch
    from torch_geometric.nn import GAT

    x = torch.randn(20 * scale, 8)
    edges = torch.randint(0, 20 * scale, (2, 60 * scale))
    return GAT(8, 16 * scale, num_layers=2, out_channels=4, heads=2), (x, edges)


def pyg_graphsage_pool(scale: int = 1):
    import torch
    from torch_geometric.nn import GraphSAGE, global_mean_pool

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gnn = GraphSAGE(8, 16 * scale, num_layers=2, out_channels=4)

        def forward(self, x, edge_index, batch):
            return global_mean_pool(self.gnn(x, edge_index), batch)

    x = torch.randn(20 * scale, 8)
    edges = torch.randint(0, 20 * scale, (2, 60 * scale))
    batch = torch.arange(20 * scale) // 10
    return Pooled(), (x, edges, batch)


def esm2(scale: int = 1):
    import esm
    import torch

    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    model = esm.model.esm2.ESM2(num_layers=2, embed_dim=32 * scale, attention_heads=2, alphabet=alphabet)
    tokens = torch.randint(4, 24, (2 * scale, 16))
    return model, (tokens,)


def _scheduler_step(scheduler_cls, scale: int = 1, **kwargs):
    import torch

    class SamplingStep(torch.nn.Module):
        """One denoising step of a compiled sampling loop: the scheduler's `step` in forward."""

        def __init__(self):
            super().__init__()
            self.scheduler = scheduler_cls(num_train_timesteps=100, **kwargs)
            self.scheduler.set_timesteps(10)
            # what `step` may rebind or grow: the objects themselves (dynamo guards on them) and
            # the contents of its lists (PNDM's history)
            self._fresh = dict(self.scheduler.__dict__)
            self._lists = {k: copy.copy(v) for k, v in self._fresh.items() if isinstance(v, list)}

        def forward(self, model_output, timestep, sample):
            return self.scheduler.step(model_output, timestep, sample).prev_sample

        def reset_state(self) -> None:
            """Make a repeated call the same step: the loop's first, after the index was found.

            `step` advances a Python int index (a guard: every step would recompile) and finds it
            from the timestep only when it is None, once per sampling loop; Heun and PNDM also keep
            the half or the history of a multistep update. All of it goes back to after
            `set_timesteps`, then the index to the first step."""
            state = self.scheduler.__dict__
            for name in set(state) - set(self._fresh):
                del state[name]
            state.update(self._fresh)
            for name, items in self._lists.items():
                state[name][:] = items
            if hasattr(self.scheduler, "_step_index"):
                self.scheduler._step_index = 0

    step = SamplingStep()
    t = step.scheduler.timesteps[0]
    shape = (1, 4, 8 * scale, 8 * scale)
    return step, (torch.randn(shape), t, torch.randn(shape))


def df_ddpm_step(scale: int = 1):
    from diffusers import DDPMScheduler

    return _scheduler_step(DDPMScheduler, scale)


def df_euler_step(scale: int = 1):
    from diffusers import EulerDiscreteScheduler

    return _scheduler_step(EulerDiscreteScheduler, scale)


def _scheduler_call(scheduler_cls, scale: int = 1):
    """A scheduler whose `step` also takes the inpainting inputs (RePaint): `forward` passes them."""
    import torch

    step, (model_output, t, sample) = _scheduler_step(scheduler_cls, scale)

    class InpaintingStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scheduler = step.scheduler

        def forward(self, model_output, timestep, sample, original_image, mask):
            return self.scheduler.step(model_output, timestep, sample, original_image, mask).prev_sample

    mask = (torch.rand_like(sample) > 0.5).float()
    return InpaintingStep(), (model_output, t, sample, torch.randn_like(sample), mask)


def df_cm_step(scale: int = 1):
    from diffusers import CMStochasticIterativeScheduler

    return _scheduler_step(CMStochasticIterativeScheduler, scale)


def df_ddim_parallel_step(scale: int = 1):
    from diffusers import DDIMParallelScheduler

    return _scheduler_step(DDIMParallelScheduler, scale)


def df_ddim_step(scale: int = 1):
    from diffusers import DDIMScheduler

    return _scheduler_step(DDIMScheduler, scale)


def df_edm_euler_step(scale: int = 1):
    from diffusers import EDMEulerScheduler

    return _scheduler_step(EDMEulerScheduler, scale)


def df_euler_a_step(scale: int = 1):
    from diffusers import EulerAncestralDiscreteScheduler

    return _scheduler_step(EulerAncestralDiscreteScheduler, scale)


def df_flow_heun_step(scale: int = 1):
    from diffusers import FlowMatchHeunDiscreteScheduler

    return _scheduler_step(FlowMatchHeunDiscreteScheduler, scale)


def df_lcm_step(scale: int = 1):
    from diffusers import LCMScheduler

    return _scheduler_step(LCMScheduler, scale)


def df_pndm_step(scale: int = 1):
    from diffusers import PNDMScheduler

    return _scheduler_step(PNDMScheduler, scale)


def df_repaint_step(scale: int = 1):
    from diffusers import RePaintScheduler

    return _scheduler_call(RePaintScheduler, scale)


def df_sasolver_step(scale: int = 1):
    from diffusers import SASolverScheduler

    return _scheduler_step(SASolverScheduler, scale)


def df_tcd_step(scale: int = 1):
    from diffusers import TCDScheduler

    return _scheduler_step(TCDScheduler, scale)


def df_unclip_step(scale: int = 1):
    from diffusers import UnCLIPScheduler

    return _scheduler_step(UnCLIPScheduler, scale)


def _df_model(model, **inputs):
    """A diffusers model whose forward takes the tensors of `inputs` in order, the rest fixed."""
    import torch

    class Denoise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
            self.constants = {k: v for k, v in inputs.items() if not isinstance(v, torch.Tensor)}

        def forward(self, *tensors):
            return self.model(
                **dict(zip(self.names, tensors, strict=True)), **self.constants, return_dict=False
            )[0]

    return Denoise(), tuple(v for v in inputs.values() if isinstance(v, torch.Tensor))


def _text_mask(length: int = 4):
    """A text-encoder mask with its last token padded, as a pipeline passes for a short prompt."""
    import torch

    mask = torch.ones(1, length)
    mask[:, -1] = 0
    return mask


def df_lumina2(scale: int = 1):
    import torch
    from diffusers import Lumina2Transformer2DModel

    model = Lumina2Transformer2DModel(
        sample_size=8,
        patch_size=2,
        in_channels=4,
        hidden_size=32 * scale,
        num_layers=1,
        num_refiner_layers=1,
        num_attention_heads=2,
        num_kv_heads=1,
        multiple_of=16,
        axes_dim_rope=(4, 6, 6),
        axes_lens=(32, 32, 32),
        cap_feat_dim=16,
    )
    return _df_model(
        model,
        hidden_states=torch.randn(1, 4, 8, 8),
        timestep=torch.tensor([0.5]),
        encoder_hidden_states=torch.randn(1, 4, 16),
        encoder_attention_mask=torch.ones(1, 4, dtype=torch.bool),
    )


def df_mochi(scale: int = 1):
    import torch
    from diffusers import MochiTransformer3DModel

    model = MochiTransformer3DModel(
        patch_size=2,
        num_attention_heads=2,
        attention_head_dim=8 * scale,
        num_layers=1,
        pooled_projection_dim=16,
        in_channels=4,
        text_embed_dim=16,
        time_embed_dim=4,
        max_sequence_length=4,
    )
    return _df_model(
        model,
        hidden_states=torch.randn(1, 4, 1, 8, 8),
        encoder_hidden_states=torch.randn(1, 4, 16),
        timestep=torch.tensor([1]),
        encoder_attention_mask=_text_mask(),
    )


def df_ddim_pipeline(scale: int = 1):
    import torch
    from diffusers import DDIMPipeline, DDIMScheduler

    unet = _tiny_unet(scale)
    pipe = DDIMPipeline(unet=unet, scheduler=DDIMScheduler(num_train_timesteps=100))
    pipe.set_progress_bar_config(disable=True)

    class Sample(torch.nn.Module):
        """A whole two-step DDIM sampling loop, the pipeline's `__call__`, in forward (noise drawn
        from the global generator; `batch` only gives the batch size)."""

        def __init__(self):
            super().__init__()
            self.unet = unet

        def forward(self, batch):
            return pipe(
                batch_size=batch.shape[0], num_inference_steps=2, output_type="pt", return_dict=False
            )[0]

    return Sample(), (torch.zeros(1),)


def _tiny_unet(scale: int = 1):
    from diffusers import UNet2DModel

    return UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(32 * scale, 64 * scale),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=32,
        attention_head_dim=8,
    )


def _pipeline_loop(pipe, **call):
    """A whole two-step sampling loop, a pipeline's `__call__`, in forward (noise from the global
    generator; `batch` only gives the batch size)."""
    import torch

    pipe.set_progress_bar_config(disable=True)

    class Sample(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.unet = pipe.unet

        def forward(self, batch):
            return pipe(batch_size=batch.shape[0], num_inference_steps=2, return_dict=False, **call)[0]

    return Sample(), (torch.zeros(1),)


# fixes9: entries from files no fix was written for (UNTUNED9), chosen by whether they break, and
# fixed blind: main's rules first, then the branch's.


def df_ddpm_pipeline(scale: int = 1):
    from diffusers import DDPMPipeline, DDPMScheduler

    pipe = DDPMPipeline(unet=_tiny_unet(scale), scheduler=DDPMScheduler(num_train_timesteps=100))
    return _pipeline_loop(pipe, output_type="pt")


def df_score_sde_ve_pipeline(scale: int = 1):
    from diffusers import ScoreSdeVePipeline, ScoreSdeVeScheduler

    pipe = ScoreSdeVePipeline(unet=_tiny_unet(scale), scheduler=ScoreSdeVeScheduler())
    return _pipeline_loop(pipe, output_type="pt")


def df_cm_pipeline(scale: int = 1):
    from diffusers import CMStochasticIterativeScheduler, ConsistencyModelPipeline

    pipe = ConsistencyModelPipeline(unet=_tiny_unet(scale), scheduler=CMStochasticIterativeScheduler())
    return _pipeline_loop(pipe, output_type="pt")


def hf_led(scale: int = 1):
    from transformers import LEDConfig, LEDModel

    config = LEDConfig(
        vocab_size=100,
        d_model=32 * scale,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64 * scale,
        decoder_ffn_dim=64 * scale,
        attention_window=[16],
        max_encoder_position_embeddings=64,
        max_decoder_position_embeddings=64,
    )
    ids = _ids(100, batch=2 * scale, length=24)  # padded to the window's multiple: the logger's branch
    return LEDModel(config), (ids, None, ids[:, :8])


def _codec_sizes(scale: int) -> dict:
    """Tiny sizes that Mimi's and Pocket TTS's configs share (SEANet convolutions and a transformer)."""
    return {
        "hidden_size": 16 * scale,
        "num_filters": 4 * scale,
        "upsampling_ratios": [2, 2],
        "num_hidden_layers": 1,
        "intermediate_size": 32 * scale,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "upsample_groups": 16 * scale,
        "sliding_window": 16,
    }


def hf_pocket_tts_audio_tokenizer(scale: int = 1):
    import torch
    from transformers import PocketTTSAudioTokenizerConfig, PocketTTSAudioTokenizerModel

    config = PocketTTSAudioTokenizerConfig(**_codec_sizes(scale), latent_stride=2, latent_dim=8)
    return PocketTTSAudioTokenizerModel(config), (torch.randn(scale, 1, 256),)


def hf_mimi(scale: int = 1):
    import torch
    from transformers import MimiConfig, MimiModel

    config = MimiConfig(
        **_codec_sizes(scale),
        **_codebook(scale),
        num_quantizers=2,
        num_semantic_quantizers=1,
        vector_quantization_hidden_dimension=16 * scale,
    )
    return MimiModel(config), (torch.randn(scale, 1, 256),)


# fixes16: UNTUNED16, chosen by bench/untuned16_select.py's rule (written before tracing them) and
# measured blind. kornia is new to the corpus; the torch_geometric layers are its conv layers.


def _selected(package: str, name: str, kind: str):
    """A module UNTUNED16's rule chose, built and fed as the rule builds and feeds it."""
    import importlib

    import untuned16_select as rule

    part = 2 if package == "torch_geometric" else 1
    module, _, attr = name.rpartition(".")
    model = rule.build(getattr(importlib.import_module(module), attr), part)
    return model, rule.inputs(kind)


def kn_aliked(scale: int = 1):
    return _selected("kornia", "kornia.feature.ALIKED", "gray")


def kn_disk(scale: int = 1):
    return _selected("kornia", "kornia.feature.DISK", "rgb")


def kn_descriptor_matcher(scale: int = 1):
    return _selected("kornia", "kornia.feature.DescriptorMatcher", "descriptors")


def kn_sift_scale_space(scale: int = 1):
    return _selected("kornia", "kornia.feature.SIFTFeatureScaleSpace", "gray")


def kn_sold2(scale: int = 1):
    return _selected("kornia", "kornia.feature.SOLD2", "gray")


def kn_sold2_detector(scale: int = 1):
    return _selected("kornia", "kornia.feature.SOLD2_detector", "gray")


def kn_scale_space_detector(scale: int = 1):
    return _selected("kornia", "kornia.feature.ScaleSpaceDetector", "gray")


def pyg_agnn(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.AGNNConv", "graph")


def pyg_appnp(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.APPNP", "graph")


def pyg_cluster_gcn(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.ClusterGCNConv", "graph")


def pyg_eg(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.EGConv", "graph")


def pyg_feast(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.FeaStConv", "graph")


def pyg_gatv2(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.GATv2Conv", "graph")


def pyg_hypergraph(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.HypergraphConv", "graph")


def pyg_mf(scale: int = 1):
    return _selected("torch_geometric", "torch_geometric.nn.conv.MFConv", "graph")


# fixes17: UNTUNED17, the transformers families that bench/untuned17_select.py's rule chose (written
# before tracing them) and measured blind, each built and fed as the rule builds and feeds it.
UNTUNED17_FAMILIES = {
    "hf17_xlm": "xlm",
    "hf17_ctrl": "ctrl",
    "hf17_d_fine": "d_fine",
    "hf17_deimv2": "deimv2",
    "hf17_fastspeech2_conformer": "fastspeech2_conformer",
    "hf17_flaubert": "flaubert",
}


# fixes19: UNTUNED19, the families of the same rule's walk past fixes17's cut (bench/untuned19_select.py,
# its amendment committed before any of them was traced), measured blind.
UNTUNED19_FAMILIES = {
    "hf19_higgs_audio_v2": "higgs_audio_v2",
    "hf19_jetmoe": "jetmoe",
    "hf19_longt5": "longt5",
    "hf19_openai_privacy_filter": "openai_privacy_filter",
    "hf19_rt_detr_v2": "rt_detr_v2",
    "hf19_seamless_m4t": "seamless_m4t",
    "hf19_seamless_m4t_v2": "seamless_m4t_v2",
}
_FAMILIES = {**UNTUNED17_FAMILIES, **UNTUNED19_FAMILIES}


def _family17(model_name: str):
    """A family UNTUNED17's (or UNTUNED19's) rule chose, built and fed as the rule builds and feeds it
    (its keyword inputs passed in order by a wrapper: the corpus calls `model(*args)`)."""
    import torch
    import untuned17_select as rule

    model = rule.build(rule.base_type(_FAMILIES[model_name]))
    _kind, feed = rule.inputs(model)

    class ByName(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(feed, tensors, strict=True)))

    return ByName().eval(), tuple(feed.values())


# What a user who compiles these models tells `fuselint check`: the diffusers entries compile a
# scheduler's `step` (a compiled sampling loop) or a pipeline's `__call__`, which no `forward` reaches.
TRACED_FUNCTIONS = ("*Scheduler.step", "*Pipeline.__call__")


def project_config(folder: Path) -> Path:
    """A pyproject.toml with the corpus's [tool.fuselint] settings, for `fuselint check --config`."""
    path = folder / "pyproject.toml"
    names = ", ".join(f'"{t}"' for t in TRACED_FUNCTIONS)
    path.write_text(f"[tool.fuselint]\ntraced-functions = [{names}]\n")
    return path


MODELS = {
    "hf_longformer": "transformers",
    "hf_big_bird": "transformers",
    "hf_reformer": "transformers",
    "hf_encodec": "transformers",
    "hf_vits": "transformers",
    "hf_qwen2_vl_vision": "transformers",
    "hf_switch": "transformers",
    "pyg_gcn": "torch_geometric",
    "pyg_gat": "torch_geometric",
    "pyg_graphsage_pool": "torch_geometric",
    "esm2": "esm",
    "df_ddpm_step": "diffusers",
    "df_euler_step": "diffusers",
    # fixes5: breaking diffusers entries the rules were not tuned on; TUNE and HOLDOUT split them
    "df_cm_step": "diffusers",
    "df_ddim_parallel_step": "diffusers",
    "df_ddim_pipeline": "diffusers",
    "df_ddim_step": "diffusers",
    "df_edm_euler_step": "diffusers",
    "df_euler_a_step": "diffusers",
    "df_flow_heun_step": "diffusers",
    "df_lcm_step": "diffusers",
    "df_lumina2": "diffusers",
    "df_mochi": "diffusers",
    "df_pndm_step": "diffusers",
    "df_repaint_step": "diffusers",
    "df_sasolver_step": "diffusers",
    "df_tcd_step": "diffusers",
    "df_unclip_step": "diffusers",
    # fixes9: held out from every fix (UNTUNED9)
    "df_ddpm_pipeline": "diffusers",
    "df_score_sde_ve_pipeline": "diffusers",
    "df_cm_pipeline": "diffusers",
    "hf_led": "transformers",
    # fixes16: never tuned on (UNTUNED16, bench/untuned16_select.py's rule)
    "kn_aliked": "kornia",
    "kn_disk": "kornia",
    "kn_descriptor_matcher": "kornia",
    "kn_sift_scale_space": "kornia",
    "kn_sold2": "kornia",
    "kn_sold2_detector": "kornia",
    "kn_scale_space_detector": "kornia",
    "pyg_agnn": "torch_geometric",
    "pyg_appnp": "torch_geometric",
    "pyg_cluster_gcn": "torch_geometric",
    "pyg_eg": "torch_geometric",
    "pyg_feast": "torch_geometric",
    "pyg_gatv2": "torch_geometric",
    "pyg_hypergraph": "torch_geometric",
    "pyg_mf": "torch_geometric",
    # fixes17: never tuned on (UNTUNED17, bench/untuned17_select.py's rule)
    **dict.fromkeys(UNTUNED17_FAMILIES, "transformers"),
    # fixes19: never tuned on (UNTUNED19, bench/untuned19_select.py: the rest of fixes17's walk)
    **dict.fromkeys(UNTUNED19_FAMILIES, "transformers"),
}

# fixes14: codecs that copy EnCodec's 0-d int buffers, measured on their own (not in the corpus's count):
# pocket_tts_audio_tokenizer held out from the int-twin fix, Mimi read while it was written.
INT_BUFFER_CHECKS = {"hf_pocket_tts_audio_tokenizer": "transformers", "hf_mimi": "transformers"}


def package_of(model: str) -> str:
    return MODELS.get(model) or INT_BUFFER_CHECKS[model]


# The fixes5 entries in alphabetical order, alternately tuned on (fixes were written to remove
# their breaks) and held out (measured only), decided before any fix was written.
UNTUNED9 = ("df_ddpm_pipeline", "df_score_sde_ve_pipeline", "df_cm_pipeline", "hf_led")
# fixes16: the first 12 breaking kornia modules and the first 8 breaking torch_geometric layers, in
# the rule's order (bench/untuned16_select.py)
UNTUNED16 = tuple(m for m in MODELS if m.startswith("kn_")) + (
    "pyg_agnn",
    "pyg_appnp",
    "pyg_cluster_gcn",
    "pyg_eg",
    "pyg_feast",
    "pyg_gatv2",
    "pyg_hypergraph",
    "pyg_mf",
)
# fixes17: the transformers families of bench/untuned17_select.py's rule, in its walk order
UNTUNED17 = tuple(UNTUNED17_FAMILIES)
# fixes19: the rest of that walk (bench/untuned19_select.py), in its order
UNTUNED19 = tuple(UNTUNED19_FAMILIES)
_FIXES5 = sorted(
    m for m in MODELS if m.startswith("df_") and m not in ("df_ddpm_step", "df_euler_step", *UNTUNED9)
)
TUNE = tuple(_FIXES5[0::2])
HOLDOUT = tuple(_FIXES5[1::2])


def build(model_name: str, scale: int = 1):
    """(model, args) of a corpus model, weights and inputs seeded (the same in every process)."""
    import torch

    if model_name not in MODELS and model_name not in INT_BUFFER_CHECKS:
        raise KeyError(f"unknown model {model_name!r}; known: {', '.join(MODELS)}")
    torch.manual_seed(0)
    if model_name in _FAMILIES:
        return _family17(model_name)
    return globals()[model_name](scale)


def __getattr__(name: str):
    """The factory of a family model (`hf17_xlm`, `hf19_jetmoe`, ...), which has no function of its
    own: what `--entry bench/real_corpus.py:hf17_xlm` (fix_rate's `--prove`, `verify`) asks for."""
    if name not in _FAMILIES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def factory(scale: int = 1):
        return build(name, scale)

    factory.__name__ = factory.__qualname__ = name
    return factory


# ---------------------------------------------------------------- ground truth (child process)


def package_dirs() -> dict[str, str]:
    """Package name -> its folder, for every package of the corpus that is installed."""
    import importlib.util

    found = {}
    for package in sorted(set(MODELS.values())):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            found[package] = str(Path(list(spec.submodule_search_locations)[0]).resolve())
    return found


def _site(parsed, roots: tuple[str, ...]) -> tuple[str, int] | None:
    """The innermost frame of the break (dynamo's own location last) that lies in a corpus package."""
    frames = [(f, n) for f, n, _ in parsed.frames] + [(parsed.file, parsed.line)]
    for file, line in reversed(frames):
        resolved = str(Path(file).resolve()) if file else ""
        if resolved.startswith(roots):
            return resolved, line
    return None


def logged_sites(texts: list[str], root: str) -> list[str]:
    """`file:line gb` of each logged break's site under `root` (a package folder ending in a separator),
    the file relative to it, sorted: the selection rules' rows (bench/untuned16_select.py, 17)."""
    from fuselint.graph.breaks_log import parse_break

    found = set()
    for text in texts:
        parsed = parse_break(text)
        site = _site(parsed, (root,)) if parsed else None
        if site:
            found.add(f"{site[0][len(root) :]}:{site[1]} {parsed.gb_id}")
    return sorted(found)


def short_path(path: str) -> str:
    """A site's file as `package/...`, for the installed packages and for a fixed copy of them."""
    found = [(path.find(f"/{name}/"), name) for name in set(MODELS.values()) if f"/{name}/" in path]
    if not found:
        return path
    at, name = min(found)  # the package folder, not a subfolder of it (diffusers/models/transformers/)
    return path[at + 1 :]


def describe_site(site: dict, width: int = 70) -> str:
    return f"`{short_path(site['file'])}:{site['line']}` {site['gb']} {site.get('reason', '')[:width]}"


class _Breaks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + str(record.exc_info[1])
        self.texts.append(text)


def listen_breaks() -> _Breaks:
    """Turn dynamo's graph-break log on and collect its records (each break event's text) in a handler."""
    import torch._logging

    handler = _Breaks()
    names = [n for n in logging.root.manager.loggerDict if n.endswith("__graph_breaks")]
    names += ["torch._dynamo.convert_frame.__graph_breaks", "torch._dynamo.symbolic_convert.__graph_breaks"]
    torch._logging.set_logs(graph_breaks=True)
    for n in set(names):
        lg = logging.getLogger(n)
        lg.addHandler(handler)
        lg.propagate = False
    return handler


def ground_truth(model_name: str, outputs: str | None = None) -> dict:
    """Run one model under torch.compile with a recording backend; its break sites and graphs."""
    import torch

    from fuselint.graph.breaks_log import parse_break
    from fuselint.verify.numerics import flatten

    model, args = build(model_name)
    model.eval()
    roots = tuple(d + os.sep for d in package_dirs().values())
    handler = listen_breaks()
    graphs: list[int] = []

    def recorder(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=recorder, dynamic=False)
    started = time.perf_counter()
    error = ""
    with torch.no_grad():
        eager = model(*args)
        try:
            compiled(*args)
        except Exception as exc:  # noqa: BLE001 - a model that cannot run is a row, not a crash
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    sites: dict[tuple[str, int], dict] = {}
    for text in handler.texts:
        parsed = parse_break(text)  # dynamo's own text: its frames, gb id and specific reason
        site = _site(parsed, roots) if parsed else None
        if site is None:
            continue
        entry = sites.setdefault(site, {"file": site[0], "line": site[1], "gb": parsed.gb_id, "events": 0})
        entry["events"] += 1
        if parsed.reason and "reason" not in entry:
            entry["reason"] = parsed.reason[:160]
    if outputs:
        torch.save([t for _path, t in flatten(eager) if isinstance(t, torch.Tensor)], outputs)
    return {
        "imported": imported_files(),
        "model": model_name,
        "package": package_of(model_name),
        "graphs": len(graphs),
        "events": sum(s["events"] for s in sites.values()),
        "sites": sorted(sites.values(), key=lambda s: (s["file"], s["line"])),
        "error": error,
        "seconds": round(time.perf_counter() - started, 1),
        "torch": torch.__version__,
    }


def imported_files() -> list[str]:
    """The corpus packages' source files this process imported, as `package/...` (`short_path`): what
    a trace read, so a later run may keep a model's row when none of them changed (fix_rate's --reuse)."""
    names = set(MODELS.values())
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        short = short_path(path) if path.endswith(".py") else path
        if short != path and short.split("/", 1)[0] in names:
            found.add(short)
    return sorted(found)


def own_file(model, roots: tuple[str, ...]) -> str | None:
    """The corpus file that defines the model itself: the class, in a corpus package, of the first
    object met breadth-first from the built entry through the closure of its class's `forward`, its
    submodules and its other attributes (the corpus's wrappers hold the model, scheduler or pipeline
    they call). fix_rate lints it with the files that hold the break sites."""
    import inspect

    queue, seen = [model], set()
    while queue:
        obj = queue.pop(0)
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(obj))
        try:
            path = str(Path(inspect.getsourcefile(type(obj)) or "").resolve())
        except TypeError:
            path = ""
        if path.startswith(roots):
            return path
        forward = getattr(type(obj), "forward", None)
        queue += [cell.cell_contents for cell in getattr(forward, "__closure__", None) or ()]
        attributes = getattr(obj, "__dict__", {})
        queue += list(attributes.get("_modules", {}).values())
        queue += [v for k, v in attributes.items() if not k.startswith("_")]
    return None


def own_files(models: list[str]) -> dict[str, str | None]:
    """`own_file` of each model, built in this process."""
    roots = tuple(d + os.sep for d in package_dirs().values())
    return {m: own_file(build(m)[0], roots) for m in models}


def child_env(pythonpath: str = "") -> dict[str, str]:
    """The environment of a child process: `pythonpath` (a fixed copy of the packages) first, then fuselint."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def run_child(model: str, pythonpath: str = "", outputs: str | None = None, timeout: int = 600) -> dict:
    """`ground_truth` in a fresh process; `pythonpath` first on the path (a fixed copy of the packages)."""
    env = child_env(pythonpath)
    cmd = [sys.executable, str(HERE), model, "--json"]
    if outputs:
        cmd += ["--outputs", outputs]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {
            "model": model,
            "package": package_of(model),
            "error": f"timed out after {timeout} s",
            "sites": [],
        }
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {
        "model": model,
        "package": package_of(model),
        "error": tail[:200],
        "sites": [],
        "graphs": 0,
        "events": 0,
    }


def stdlib_dir() -> str:
    return sysconfig.get_paths()["stdlib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--outputs", help="save the eager outputs' tensors here (torch.save)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--own-files", help="comma-separated models: print each one's `own_file` as JSON")
    args = parser.parse_args()
    if args.own_files:
        print(json.dumps(own_files(args.own_files.split(","))))
        return
    if args.list or not args.model:
        print("\n".join(f"{m}\t{p}" for m, p in MODELS.items()))
        return
    result = ground_truth(args.model, args.outputs)
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
