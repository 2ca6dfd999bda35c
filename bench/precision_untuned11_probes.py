"""Dynamo checks behind bench/results/precision_untuned11.md (FL1 recall and precision on
asteroid 0.7.0 + asteroid-filterbanks 0.4.0; torch 2.13 CPU).

Each run compiles real asteroid code (pure Python) with random weights, tiny sizes, seeded, the way
an asteroid recipe's compiled `System.common_step` calls it: the separation models of
`asteroid.models` (Conv-TasNet, DPRNN-TasNet, DPTNet, DCCRNet, DCUNet, SuDO-RM-RF, LSTM-TasNet,
DeMask, FaSNet-TAC, X-UMX), the filterbanks of `asteroid_filterbanks` (encoder/decoder pairs,
sinc, mel, gammatone, PCEN, Griffin-Lim) and the losses of `asteroid.losses` (PIT, Sinkhorn PIT,
MixIT, deep clustering, multi-scale spectral). Runs labelled "train" keep autograd on and call
backward. Break sites come from dynamo's `graph_breaks` log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned11_probes.py [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned11_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import CallWith, probe_main

PACKAGES = ("asteroid", "asteroid_filterbanks")


def a_runs() -> list:
    import asteroid_filterbanks as afb
    from asteroid import losses, models
    from asteroid.losses import sdr
    from asteroid.masknn import recurrent
    from asteroid_filterbanks import transforms
    from asteroid_filterbanks.griffin_lim import griffin_lim
    from asteroid_filterbanks.pcen import PCEN

    torch.manual_seed(0)
    wav = torch.randn(2, 800)
    srcs = torch.randn(2, 2, 800)
    est = torch.randn(2, 2, 800)
    tiny = dict(n_filters=16, kernel_size=16, stride=8)

    def enc_dec(name, **kw):
        enc, dec = afb.make_enc_dec(name, **kw)
        return CallWith((enc, dec), lambda m, x: m[1](m[0](x)))

    runs = [
        ("ConvTasNet forward", lambda: models.ConvTasNet(2, n_blocks=2, n_repeats=1, bn_chan=8, hid_chan=8, skip_chan=8, **tiny), (wav,)),
        ("train ConvTasNet forward", lambda: models.ConvTasNet(2, n_blocks=2, n_repeats=1, bn_chan=8, hid_chan=8, skip_chan=8, **tiny), (wav,)),
        ("ConvTasNet forward 3d", lambda: models.ConvTasNet(2, n_blocks=2, n_repeats=1, bn_chan=8, hid_chan=8, skip_chan=8, **tiny), (wav[:, None],)),
        ("DPRNNTasNet forward", lambda: models.DPRNNTasNet(2, bn_chan=8, hid_size=8, chunk_size=10, n_repeats=1, **tiny), (wav,)),
        ("train DPRNNTasNet forward", lambda: models.DPRNNTasNet(2, bn_chan=8, hid_size=8, chunk_size=10, n_repeats=1, **tiny), (wav,)),
        ("DPRNNTasNet GRU mulcat forward", lambda: models.DPRNNTasNet(2, bn_chan=8, hid_size=8, chunk_size=10, n_repeats=1, rnn_type="GRU", use_mulcat=True, **tiny), (wav,)),
        ("DPTNet forward", lambda: models.DPTNet(2, n_heads=2, ff_hid=8, chunk_size=10, n_repeats=1, **tiny), (wav,)),
        ("DCCRNet forward", lambda: models.DCCRNet("mini", stft_n_filters=64, stft_kernel_size=64, stft_stride=16), (wav,)),
        ("DCUNet forward", lambda: models.DCUNet("mini", stft_n_filters=64, stft_kernel_size=64, stft_stride=16), (torch.randn(2, 832),)),
        ("train DCUNet forward", lambda: models.DCUNet("mini", stft_n_filters=64, stft_kernel_size=64, stft_stride=16), (torch.randn(2, 832),)),
        ("SuDORMRFNet forward", lambda: models.SuDORMRFNet(2, bn_chan=8, num_blocks=2, upsampling_depth=2, n_filters=16), (wav,)),
        ("SuDORMRFImprovedNet forward", lambda: models.SuDORMRFImprovedNet(2, bn_chan=8, num_blocks=2, upsampling_depth=2, n_filters=16), (wav,)),
        ("LSTMTasNet forward", lambda: models.LSTMTasNet(2, n_layers=1, hid_size=8, **tiny), (wav,)),
        ("DeMask forward", lambda: models.DeMask(hidden_dims=(16,), n_filters=64, stride=32, kernel_size=64), (wav,)),
        ("FasNetTAC forward", lambda: models.FasNetTAC(2, enc_dim=8, feature_dim=8, hidden_dim=8, n_layers=1, tac_hidden_dim=8, chunk_size=10, hop_size=5), (torch.randn(2, 2, 800), torch.tensor([2, 1]))),
        ("DPRNN masker forward", lambda: recurrent.DPRNN(16, 2, bn_chan=8, hid_size=8, chunk_size=10, n_repeats=1), (torch.randn(2, 16, 40),)),
        ("free enc/dec", lambda: enc_dec("free", **tiny), (wav,)),
        ("stft enc/dec", lambda: enc_dec("stft", **tiny), (wav,)),
        ("param_sinc enc", lambda: afb.Encoder(afb.ParamSincFB(16, 33)), (wav,)),
        ("analytic_free enc", lambda: afb.Encoder(afb.AnalyticFreeFB(16, 16, 8)), (wav,)),
        ("PCEN forward", lambda: PCEN(n_channels=8), (torch.rand(2, 16, 20).abs(),)),
        ("transforms mag/angle", lambda: CallWith(None, lambda _m, x: transforms.mag(x) + transforms.angle(x)), (torch.randn(2, 16, 20),)),
        ("griffin_lim", lambda: CallWith(afb.make_enc_dec("stft", n_filters=64, kernel_size=64, stride=16), lambda m, s: griffin_lim(s, m[1], n_iter=2)), (torch.rand(2, 33, 51),)),
        ("PIT pw_mtx sisdr", lambda: losses.PITLossWrapper(losses.pairwise_neg_sisdr, pit_from="pw_mtx"), (est, srcs)),
        ("train PIT pw_mtx sisdr return_est", lambda: CallWith(losses.PITLossWrapper(losses.pairwise_neg_sisdr, pit_from="pw_mtx"), lambda m, e, t: m(e, t, return_est=True)[0]), (est.clone().requires_grad_(), srcs)),
        ("PIT pw_pt sisdr", lambda: losses.PITLossWrapper(losses.singlesrc_neg_sisdr, pit_from="pw_pt"), (est, srcs)),
        ("PIT perm_avg sisdr", lambda: losses.PITLossWrapper(losses.multisrc_neg_sisdr, pit_from="perm_avg"), (est, srcs)),
        ("PIT pw_mtx 3 sources", lambda: losses.PITLossWrapper(losses.pairwise_neg_sisdr, pit_from="pw_mtx"), (torch.randn(2, 3, 800), torch.randn(2, 3, 800))),
        ("PIT pw_mtx mse", lambda: losses.PITLossWrapper(losses.pairwise_mse, pit_from="pw_mtx"), (est, srcs)),
        ("SinkPIT", lambda: losses.SinkPITLossWrapper(losses.pairwise_neg_sisdr, n_iter=3), (est, srcs)),
        ("MixIT", lambda: losses.MixITLossWrapper(losses.multisrc_neg_sisdr, generalized=False), (torch.randn(2, 4, 800), srcs)),
        ("MixIT generalized", lambda: losses.MixITLossWrapper(losses.multisrc_neg_sisdr, generalized=True), (torch.randn(2, 4, 800), srcs)),
        ("singlesrc_neg_sdsdr", lambda: sdr.SingleSrcNegSDR("sdsdr"), (wav, torch.randn(2, 800))),
        ("deep_clustering_loss", lambda: losses.deep_clustering_loss, (torch.randn(2, 40, 8), torch.randint(0, 2, (2, 4, 10)))),
        ("SingleSrcMultiScaleSpectral", lambda: losses.SingleSrcMultiScaleSpectral(n_filters=[64, 32], windows_size=[64, 32], hops_size=[16, 8]), (wav, torch.randn(2, 800))),
        ("SingleSrcPMSQE", lambda: CallWith(losses.SingleSrcPMSQE(), lambda m, e, t: m(e, t)), (torch.rand(2, 10, 257), torch.rand(2, 10, 257))),
    ]  # fmt: skip
    return runs


if __name__ == "__main__":
    probe_main(a_runs, PACKAGES, "precision_untuned11_probes.py", sys.argv)
