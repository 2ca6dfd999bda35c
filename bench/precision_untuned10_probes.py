"""Dynamo checks behind bench/results/precision_untuned10.md (FL1 recall and precision on
speechbrain 1.1.2, held out: chosen before any finding was read; torch 2.13 CPU).

Each run compiles real speechbrain code (pure Python) with random weights, tiny sizes, seeded, the
way a speechbrain recipe's compiled `compute_forward` calls it: the feature front ends
(`lobes.features`), speaker and ASR encoders (`lobes.models`: ECAPA-TDNN, x-vector, ResNet, CRDNN,
ContextNet, Transformer / Conformer / Branchformer ASR), separation and enhancement models
(Conv-TasNet, SepFormer's dual path, MetricGAN, EnhanceResnet), vocoders (HiFi-GAN, DiffWave), the
`nnet` layers with relative lengths, and the losses of `nnet.losses`. Runs labelled "train" keep
autograd on and call backward. Break sites come from dynamo's `graph_breaks` log
(bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned10_probes.py [--json SITES.json]

Each run builds its model when it runs (a build error is printed as its row). `--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned10_sites.json, which `bench/rescore_judged.py --recall` scores.

speechbrain imports torchaudio at import time (`utils/torch_audio_backend.py`, to read its
version); no torchaudio wheel loads its C library on torch 2.13, so where the import fails a module
holding only `__version__` stands in for it. No probed code calls torchaudio.
"""

from __future__ import annotations

import sys
import types

import torch
from break_probe import compile_run as _compile_run
from break_probe import listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("speechbrain",)


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, PACKAGES, "precision_untuned10_probes.py")


def compile_run(label: str, fn, args, breaks, kwargs=None) -> tuple[str, list[str]]:
    """`break_probe.compile_run` with this file's sites named by `_user`."""
    return _compile_run(label, fn, args, breaks, _user, kwargs)


def _torchaudio_stand_in() -> None:
    try:
        import torchaudio  # noqa: F401
    except (ImportError, OSError):
        stand_in = types.ModuleType("torchaudio")
        stand_in.__version__ = "2.11.0"  # type: ignore[attr-defined]
        for part in ("transforms", "functional"):  # imported by name in HifiGAN.py, CNN.py
            sys.modules[f"torchaudio.{part}"] = types.ModuleType(f"torchaudio.{part}")
            setattr(stand_in, part, sys.modules[f"torchaudio.{part}"])
        sys.modules["torchaudio"] = stand_in


# ---- speechbrain --------------------------------------------------------------------------------


def s_runs() -> list:
    _torchaudio_stand_in()
    from speechbrain.augment import augmenter, freq_domain, time_domain
    from speechbrain.lobes import features
    from speechbrain.lobes.models import (
        CRDNN,
        ECAPA_TDNN,
        HifiGAN,
        MetricGAN,
        ResNet,
        Xvector,
        conv_tasnet,
        dual_path,
    )
    from speechbrain.lobes.models.Cnn14 import Cnn14
    from speechbrain.lobes.models.ContextNet import ContextNet
    from speechbrain.lobes.models.DiffWave import DiffWave
    from speechbrain.lobes.models.EnhanceResnet import EnhanceResnet
    from speechbrain.lobes.models.RNNLM import RNNLM
    from speechbrain.lobes.models.transformer.TransformerASR import TransformerASR
    from speechbrain.nnet import CNN, RNN, losses, pooling
    from speechbrain.processing import features as pf

    torch.manual_seed(0)
    wav = torch.randn(2, 1600)
    feats = torch.rand(2, 20, 16)
    lens = torch.tensor([1.0, 0.75])  # speechbrain's relative lengths
    tokens = torch.randint(1, 10, (2, 6))

    def asr(**kw):
        return TransformerASR(10, 16, 32, 4, 1, 1, 64, dropout=0.0, **kw)

    class _Encode(nn.Module):
        """`TransformerASR.encode(src, wav_len)` (what a recipe's decoding runs)."""

        def __init__(self, net) -> None:
            super().__init__()
            self.net = net

        def forward(self, x, wav_len):
            return self.net.encode(x, wav_len)

    def _fitted(norm, x, lengths):
        """`InputNormalization` after one training step: evaluation reads the statistics it kept."""
        norm.train()
        norm(x, lengths)
        return norm

    runs = [
        ("Fbank forward", lambda: features.Fbank(n_mels=16), (wav,)),
        ("MFCC forward", lambda: features.MFCC(n_mels=16, n_mfcc=12), (wav,)),
        ("STFT forward", lambda: pf.STFT(sample_rate=16000), (wav,)),
        ("InputNormalization forward", lambda: _fitted(pf.InputNormalization(), feats, lens), (feats, lens)),
        ("train InputNormalization forward", lambda: pf.InputNormalization(), (feats, lens)),
        ("ECAPA_TDNN forward", lambda: ECAPA_TDNN.ECAPA_TDNN(16, channels=[16, 16, 16, 16, 48], lin_neurons=8), (feats,)),
        ("ECAPA_TDNN forward lengths", lambda: ECAPA_TDNN.ECAPA_TDNN(16, channels=[16, 16, 16, 16, 48], lin_neurons=8), (feats, lens)),
        ("train ECAPA_TDNN forward lengths", lambda: ECAPA_TDNN.ECAPA_TDNN(16, channels=[16, 16, 16, 16, 48], lin_neurons=8), (feats, lens)),
        ("Xvector forward", lambda: Xvector.Xvector("cpu", in_channels=16, tdnn_channels=[8, 8, 8, 8, 16], lin_neurons=8), (feats, lens)),
        ("ResNet forward", lambda: ResNet.ResNet(input_size=16, channels=[4, 4, 8, 8], lin_neurons=8), (feats, lens)),
        ("CRDNN forward", lambda: CRDNN.CRDNN(input_shape=feats.shape, cnn_channels=(4, 8), rnn_neurons=8, dnn_neurons=8), (feats,)),
        ("train CRDNN forward", lambda: CRDNN.CRDNN(input_shape=feats.shape, cnn_channels=(4, 8), rnn_neurons=8, dnn_neurons=8), (feats,)),
        ("ContextNet forward", lambda: ContextNet(input_shape=feats.shape, out_channels=16, conv_channels=[8] * 3, num_blocks=3, strides=[1, 2, 1], num_layers=2, inner_dim=4), (feats,)),
        ("TransformerASR forward", lambda: asr(), (feats, tokens, lens)),
        ("train TransformerASR forward", lambda: asr(), (feats, tokens, lens)),
        ("TransformerASR encode", lambda: _Encode(asr()), (feats, lens)),
        ("Conformer TransformerASR forward", lambda: asr(encoder_module="conformer", attention_type="RelPosMHAXL", normalize_before=True, causal=False), (feats, tokens, lens)),
        ("Branchformer TransformerASR forward", lambda: asr(encoder_module="branchformer", attention_type="RelPosMHAXL", normalize_before=True, causal=False, csgu_linear_units=32), (feats, tokens, lens)),
        ("LSTM forward lengths", lambda: RNN.LSTM(8, input_shape=feats.shape), (feats, None, lens)),
        ("StatisticsPooling forward lengths", lambda: pooling.StatisticsPooling(), (feats, lens)),
        ("RNNLM forward", lambda: RNNLM(output_neurons=10, embedding_dim=8, rnn_neurons=8, dnn_neurons=8), (tokens,)),
        ("ConvTasNet MaskNet forward", lambda: conv_tasnet.MaskNet(8, 8, 8, 3, 2, 1, 2), (torch.randn(2, 8, 40),)),
        ("SepFormer Dual_Path_Model forward", lambda: dual_path.Dual_Path_Model(8, 8, dual_path.SBTransformerBlock(1, 8, 2), dual_path.SBTransformerBlock(1, 8, 2), num_spks=2, K=10), (torch.randn(2, 8, 40),)),
        ("MetricGAN EnhancementGenerator forward", lambda: MetricGAN.EnhancementGenerator(), (torch.rand(2, 20, 257), lens)),
        ("EnhanceResnet forward", lambda: EnhanceResnet(n_fft=64, win_length=4, hop_length=2, channel_counts=[8, 8], dense_count=1, dense_nodes=16), (wav[:, :400],)),
        ("HifiganGenerator forward", lambda: HifiGAN.HifiganGenerator(16, 1, "1", [[1, 3, 5], [1, 3, 5]], [3, 5], [4, 4], 16, [2, 2]), (torch.rand(2, 16, 8),)),
        ("DiffWave forward", lambda: DiffWave(input_channels=16, residual_layers=2, residual_channels=8, dilation_cycle_length=2, total_steps=10), (torch.randn(2, 1, 256), torch.tensor([3, 7]), torch.rand(2, 16, 1))),
        ("ctc_loss", lambda: losses.ctc_loss, (torch.randn(2, 20, 10).log_softmax(-1), tokens, lens, torch.tensor([1.0, 0.5]), 0)),
        ("nll_loss", lambda: losses.nll_loss, (torch.randn(2, 6, 10).log_softmax(-1), tokens, lens)),
        ("get_si_snr_with_pitwrapper", lambda: losses.get_si_snr_with_pitwrapper, (torch.randn(2, 100, 2), torch.randn(2, 100, 2))),
        ("Cnn14 forward", lambda: Cnn14(64, 8), (torch.rand(2, 64, 64),)),
        ("SincConv forward", lambda: CNN.SincConv(out_channels=8, kernel_size=65, input_shape=(2, 1600)), (wav,)),
        ("AdditiveAngularMargin", lambda: losses.AdditiveAngularMargin(margin=0.2, scale=30), (torch.rand(2, 5) * 2 - 1, torch.nn.functional.one_hot(torch.tensor([1, 3]), 5).float())),
        ("train DropFreq forward", lambda: time_domain.DropFreq(), (wav,)),
        ("train DropChunk forward", lambda: time_domain.DropChunk(drop_length_low=10, drop_length_high=50), (wav, lens)),
        ("train SpectrogramDrop forward", lambda: freq_domain.SpectrogramDrop(), (feats,)),
        ("train Augmenter forward", lambda: augmenter.Augmenter(min_augmentations=2, max_augmentations=2, augmentations=[time_domain.DropFreq(), time_domain.DropChunk(drop_length_low=10, drop_length_high=50)]), (wav, lens)),
        ("l1_loss", lambda: losses.l1_loss, (torch.randn(2, 6, 3), torch.randn(2, 6, 3), lens)),
    ]  # fmt: skip
    return runs


def main() -> None:
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    records = probe_rows(s_runs(), compile_run, PACKAGES, breaks, build=True)
    write_sites(out, records)


if __name__ == "__main__":
    main()
