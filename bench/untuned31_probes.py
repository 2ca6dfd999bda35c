"""Dynamo checks behind the verdicts of bench/results/precision_untuned31.md (prec31, issue 11): each probe
compiles an installed audiocraft 1.3.0 class on a tiny config, or a few-line reproduction of a sampled line
where the class needs a checkpoint or a package that cannot be installed here (torch 2.13 CPU, backend eager,
dynamic=False). A row prints the graphs, their op count and the lines where dynamo logged a break.

    cd bench && PYTHONPATH=$PWD/..:$PWD:AUDIOCRAFT_PARENT PROBE_VENV/bin/python untuned31_probes.py

PROBE_VENV sees the corpus venv's torch 2.13 (a .pth line) plus audiocraft's light requirements (soundfile,
av, julius, omegaconf, einops, num2words, spacy, flashy, dora-search, torchmetrics). torchaudio has no build
for torch 2.13 and librosa is heavy: both are replaced at import by empty stand-in modules, and no probed line
calls them. darts 0.48.1 needs pandas, xarray and Lightning; its three lines are probed as reproductions.
"""

from __future__ import annotations

import copy
import importlib.machinery
import random
import sys
import types

import torch
from break_probe import print_probes
from torch import nn

SCRIPT = "untuned31_probes.py"
PACKAGES = ("audiocraft", "darts")


class _StandIn(types.ModuleType):
    """An importable empty module whose attributes are empty modules too."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{self.__name__}.{name}")


def _stand_in(name: str) -> types.ModuleType:
    module = _StandIn(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = module
    return module


for _name in ("torchaudio", "torchaudio.functional", "torchaudio.transforms", "librosa", "librosa.filters"):
    _stand_in(_name)


def blstm():
    """#1 (`models/unet.py:117`): `BLSTM`, built by `DiffusionUnet` with `bilstm=True` (a config option)."""
    from audiocraft.models.unet import BLSTM

    return BLSTM(8, layers=1), (torch.randn(2, 8, 5),)


def streamable_lstm():
    """#12 (`modules/lstm.py:21`): the SEANet encoder/decoder's `StreamableLSTM`."""
    from audiocraft.modules.lstm import StreamableLSTM

    return StreamableLSTM(8, num_layers=1), (torch.randn(2, 8, 5),)


def copy_texts(texts, x):
    """#2 (`modules/conditioners.py:223`): `deepcopy` of the list of descriptions in
    `WhiteSpaceTokenizer.__call__` (the class loads a spaCy model, so the line alone)."""
    texts = copy.deepcopy(texts)
    return x * len(texts[0])


def word_dropout(entries, x):
    """#3 (`modules/conditioners.py:438`): T5 word dropout in training (`word_dropout > 0`)."""
    words = [word for word in entries[0].split(" ") if random.random() >= 0.3]
    return x * len(words)


def samples(with_wav: bool) -> list:
    """Training conditions: a text attribute, and, as `MusicDataset` sets on every item, the `self_wav`
    wav condition (a tensor)."""
    from audiocraft.modules.conditioners import ConditioningAttributes, WavCondition

    wav = {"self_wav": WavCondition(torch.randn(1, 1, 8), torch.tensor([8]), [16000])} if with_wav else {}
    return [ConditioningAttributes(text={"genre": "rock"}, wav=dict(wav)) for _ in range(2)]


def attribute_dropout(with_wav: bool):
    """#8, #9 (`modules/conditioners.py:1073`, `:1076`): `AttributeDropout.forward` in training."""
    from audiocraft.modules.conditioners import AttributeDropout

    return AttributeDropout({"text": {"genre": 0.5}}), (samples(with_wav),)


def cfg_dropout(with_wav: bool):
    """#10, #11 (`modules/conditioners.py:1108`, `:1113`): `ClassifierFreeGuidanceDropout.forward` in
    training, with `p=1.0` so the drop branch (the `deepcopy`) runs too."""
    from audiocraft.modules.conditioners import ClassifierFreeGuidanceDropout

    return ClassifierFreeGuidanceDropout(p=1.0), (samples(with_wav),)


def codebook():
    """#14, #15, #16 (`quantization/core_vq.py:65`, `:131`, `:153`): `EuclideanCodebook` as the EnCodec
    config builds it (`kmeans_init=True`, `threshold_ema_dead_code=2`), first training forward."""
    from audiocraft.quantization.core_vq import EuclideanCodebook

    module = EuclideanCodebook(
        dim=4, codebook_size=8, kmeans_init=True, kmeans_iters=2, threshold_ema_dead_code=2
    )
    return module, (torch.randn(2, 16, 4),)


def orthogonal_vq():
    """#17 (`quantization/core_vq.py:335`): `VectorQuantization` with the orthogonal regularisation on the
    active codes only (`orthogonal_reg_weight > 0`, `orthogonal_reg_active_codes_only=True`), training."""
    from audiocraft.quantization.core_vq import VectorQuantization

    module = VectorQuantization(
        dim=4, codebook_size=8, orthogonal_reg_weight=1.0, orthogonal_reg_active_codes_only=True
    )
    return module, (torch.randn(2, 4, 6),)


def rvq_dropout():
    """#18 (`quantization/vq.py:79`): `ResidualVectorQuantizer` with `q_dropout=True` (config
    `encodec_base_causal`), training."""
    from audiocraft.quantization.vq import ResidualVectorQuantizer

    module = ResidualVectorQuantizer(dimension=4, n_q=2, bins=8, q_dropout=True)
    return lambda x: module(x, frame_rate=50).x, module, (torch.randn(2, 4, 6),)


def nan_branch(context):
    """#19 (darts `patchtst_fm_model.py:281`): the branch on `nan_mask.any()`, every forward."""
    nan_mask = torch.isnan(context)
    has_nan = nan_mask.any()
    if has_nan:
        return nan_mask & ((~nan_mask).cumsum(dim=1) == 0)
    return nan_mask


def running_stats(x_past):
    """#21 (darts `timesfm2p5_model.py:280`): the loop over the input patches (`input_chunk_length / 32`, a
    count the model fixes), each step a few reductions of one patch and a running update."""
    patches = x_past.unfold(1, 32, 32)
    _, num_input_patches, _ = patches.shape
    n = torch.zeros(patches.shape[0])
    mu = torch.zeros(patches.shape[0])
    for i in range(num_input_patches):
        inc_n = torch.ones_like(patches[:, i]).sum(-1)
        inc_mu = torch.nansum(patches[:, i], dim=-1) / inc_n
        mu = (n * mu + inc_n * inc_mu) / (n + inc_n)
        n = n + inc_n
    return mu


def main() -> None:
    vq_call, vq_module, vq_args = rvq_dropout()
    vq_module.train()
    lstm = nn.LSTM(8, 8, batch_first=True)
    runs = [
        ("audiocraft BLSTM (DiffusionUnet bilstm=True)", *blstm()),
        ("audiocraft StreamableLSTM", *streamable_lstm()),
        ("WhiteSpaceTokenizer deepcopy(texts)", copy_texts, (["he went home", "short"], torch.ones(2))),
        ("T5Conditioner word dropout", word_dropout, (["a song with drums"], torch.ones(2))),
        ("train AttributeDropout, text only", *attribute_dropout(False)),
        ("train AttributeDropout, text and self_wav", *attribute_dropout(True)),
        ("train ClassifierFreeGuidanceDropout p=1, text only", *cfg_dropout(False)),
        ("train ClassifierFreeGuidanceDropout p=1, text and self_wav", *cfg_dropout(True)),
        ("train EuclideanCodebook kmeans_init, dead-code 2", *codebook()),
        ("train VectorQuantization orthogonal reg, active codes", *orthogonal_vq()),
        ("train ResidualVectorQuantizer q_dropout", vq_call, vq_args),
        ("darts PatchTST-FM nan branch", nan_branch, (torch.randn(2, 8),)),
        ("darts TFT nn.LSTM encoder", lstm, (torch.randn(2, 5, 8),)),
        ("darts TimesFM 2.5 running stats, 4 patches", running_stats, (torch.randn(2, 128),)),
        ("darts TimesFM 2.5 running stats, 8 patches", running_stats, (torch.randn(2, 256),)),
    ]
    print_probes(runs, SCRIPT, PACKAGES)


if __name__ == "__main__":
    main()
