"""Dynamo checks behind bench/results/precision_untuned.md (torchaudio 2.11.0 and kornia 0.9.0).

Each probe is a tiny module that reproduces, in a few lines, one pattern a sampled FL1xx finding
flagged in torchaudio or kornia (the class docstring names the site). Dynamo only
(`backend="eager"`, `dynamic=False`): compile at size 3 and list the graph breaks dynamo logs
(the `graph_breaks` log artifact: reason, gb code, line; `torch._dynamo.explain` and the
graph-break counters miss some breaks, e.g. `warnings.warn` or an `.item()` slice bound, and
`fullgraph=True` captures `.item()` and dynamic-shape ops instead of breaking), then at size 5, counting graphs and FX ops: a break is a blocker, a graph that grows with the size is a data-sized unroll, the same graph
at both sizes is static.

    PYTHONPATH=. python bench/precision_untuned_probes.py [--torchaudio DIR] [--kornia DIR]

With `--torchaudio DIR` (DIR holds a copy of the torchaudio 2.11.0 wheel's `torchaudio/` with
`lib/*.so` removed) it also compiles the real torchaudio modules behind the sampled findings and
lists the lines dynamo breaks at; with `--kornia DIR` (the unzipped kornia 0.9.0 wheel) the same
for the kornia functions that import without `kornia_rs`.
"""

from __future__ import annotations

import sys
import types
import warnings

import torch
from break_probe import break_sites, counting_compile, listen, package_site
from torch import nn


class SliceByTensorLength(nn.Module):
    """emformer.py:170-179 `key[: mems.size(0) + right_context_blocks_length]` where the length
    is `T - torch.max(lengths).int() - summary.size(0)`, a 0-d tensor."""

    def forward(self, key, lengths):
        blocks = key.size(0) - torch.max(lengths).int() - 1
        return torch.cat([key[: 1 + blocks], key[1 + blocks :]])


class SliceByCeilTensor(nn.Module):
    """functional.py:1428 `resampled[..., :target_length]`, target_length =
    `torch.ceil(torch.as_tensor(new_freq * length / orig_freq)).long()`."""

    def forward(self, x):
        length = x.shape[-1]
        target_length = torch.ceil(torch.as_tensor(2 * length / 3)).long()
        return x[..., :target_length] * 2


class IntOfShapeProduct(nn.Module):
    """functional.py:2303 `x.reshape((int(num_signals), x.size(-1)))`, num_signals =
    `torch.tensor(x.shape[:-1]).prod()`."""

    def forward(self, x):
        num_signals = torch.tensor(x.shape[:-1]).prod()
        return x.reshape((int(num_signals), x.size(-1))) + 1


class IntPlusRand(nn.Module):
    """components.py:879 `int(mask_prob * frame / float(mask_length) + torch.rand(1))`."""

    def forward(self, x):
        frame = x.shape[-1]
        num = int(0.5 * frame / float(2) + torch.rand(1))
        return x * num


class LayerDropItem(nn.Module):
    """components.py:438 `if not (self.training and torch.rand(1).item() <= self.layer_drop)`
    (training mode: the `.item()` runs)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            if not (self.training and torch.rand(1).item() <= 0.1):
                x = layer(x)
        return x


class TriggeredOr(nn.Module):
    """filtering.py:1669-1697 vad: `has_triggered = has_triggered or (mean_meas[i] >= level)`
    then `if has_triggered:` (the `or` reads the tensor from the second channel on)."""

    def forward(self, x):
        has_triggered = False
        for i in range(x.shape[0]):
            has_triggered = has_triggered or (x[i].mean() >= 10.0)
            if has_triggered:
                break
        return x * 2


class TriggeredOrOnly(nn.Module):
    """filtering.py:1669 alone: `has_triggered = has_triggered or (...)` with no `if`, so the
    `or` itself reads the tensor from the second row on."""

    def forward(self, x):
        has_triggered = False
        for i in range(x.shape[0]):
            has_triggered = has_triggered or (x[i].mean() >= 10.0)
        return x * 2


class RangeOfTensorLength(nn.Module):
    """components.py:915 and 944 `range(length)` where `length` comes from
    `lengths = torch.full((num_mask,), mask_length)` (a 0-d tensor)."""

    def forward(self, x):
        lengths = torch.full((2,), 3)
        out = []
        for length in sorted(lengths, reverse=True):
            out.extend(x[0] + i for i in range(length))
        return torch.stack(out)


class UniqueOfMasked(nn.Module):
    """components.py:947 `torch.unique(mask_idc[mask_idc < sz])` (FL106 twice on one line)."""

    def forward(self, x):
        idx = (x * 10).long()
        return torch.unique(idx[idx < 5]).float().sum() + x


class RatioMask(nn.Module):
    """kornia feature/matching.py:232 `match_dists = ratio[mask]`, mask = `ratio <= th`."""

    def forward(self, vals):
        ratio = vals[:, 0] / vals[:, 1]
        mask = ratio <= 0.8
        return ratio[mask] * 2


class NonzeroAndWhere(nn.Module):
    """kornia's `.nonzero()` (ransac.py:845, scale_space.py:545) and one-argument `torch.where`
    (lightglue.py:943, sold2_detector.py:606, adalam/core.py:249)."""

    def forward(self, x):
        rows = (x > 0.5).nonzero().flatten()
        (cols,) = torch.where(x.flatten() > 0.2)
        return rows.float().sum() + cols.float().sum() + x


class BiLSTM(nn.Module):
    """_hdemucs.py:768 `x = self.lstm(x)[0]` (FL108; also nn.RNN in deepspeech, nn.GRU in wavernn)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 4, bidirectional=True)

    def forward(self, x):
        x = x.permute(1, 0, 2)
        return self.lstm(x)[0] + 1


class WarnOnDefaultArgument(nn.Module):
    """_multi_channel.py:322 MVDR: `if mask_n is None: warnings.warn(...)`, mask_n defaults to None."""

    def forward(self, x, mask_n=None):
        if mask_n is None:
            warnings.warn("``mask_n`` is not provided, use ``1 - mask_s`` as ``mask_n``.", stacklevel=2)
            mask_n = 1 - x
        return x * mask_n


class RequiresGradInForward(nn.Module):
    """pipelines/_tts/impl.py:121/123 `mel_spec.clone().detach().requires_grad_(True)` and
    `spec.detach().requires_grad_(False)` in the Griffin-Lim vocoder's forward."""

    def forward(self, x):
        x = torch.exp(x)
        x = x.clone().detach().requires_grad_(True)
        y = x * 2
        y = y.detach().requires_grad_(False)
        return y + 1


class RequiresGradThenBreak(nn.Module):
    """pipelines/_tts/impl.py:121 `mel_spec.clone().detach().requires_grad_(True)` followed by a
    call that breaks (`InverseMelScale`'s `torch.linalg.lstsq`, a dynamic-shape op)."""

    def forward(self, x):
        x = x.clone().detach().requires_grad_(True)
        y = x[x > 0.5]
        return y.detach() + 1


class RequiresGradOffReturned(nn.Module):
    """pipelines/_tts/impl.py:123 `spec.detach().requires_grad_(False)`, here even returned."""

    def forward(self, x):
        return (x * 2).detach().requires_grad_(False)


class RepeatInterleaveOutputSize(nn.Module):
    """kornia feature/adalam/ransac.py:283 `torch.arange(n).repeat_interleave(rdims,
    output_size=xsamples.shape[0])`: tensor repeats, but the output size is given."""

    def forward(self, x):
        repeats = torch.tensor([1, 2, 3])
        return torch.arange(3).repeat_interleave(repeats, output_size=6) + x.shape[0]


class RepeatInterleaveNoOutputSize(nn.Module):
    """The same without `output_size`: the output size depends on the repeats' values."""

    def forward(self, x):
        repeats = torch.tensor([1, 2, 3])
        return torch.arange(3).repeat_interleave(repeats) + x.shape[0]


class JitTracingBranch(nn.Module):
    """kornia filters/canny.py:82: a data-dependent `while` in a helper called only under
    `elif torch.jit.is_tracing():`, which dynamo folds to False."""

    def forward(self, x):
        if torch.jit.is_tracing():
            while bool((x > 0.5).any()):
                x = x * 0.5
        return x + 1


class FrameLoop(nn.Module):
    """functional.py:1201 sliding_window_cmn `for t in range(num_frames)` over the time axis
    (also filtering.py:1648 over channels and _hdemucs.py:775 over frames)."""

    def forward(self, x):
        num_frames = x.shape[1]
        out = torch.zeros_like(x)
        for t in range(num_frames):
            out[:, t] = x[:, max(0, t - 1) : t + 1].mean(1)
        return out


class _DecoderWithIntLength(nn.Module):
    def forward(self, z, length):
        z = z[..., 1 : 1 + length]
        if z.shape[-1] != length:
            raise ValueError("Last index of z must be equal to length")
        return z


class IntLengthArgument(nn.Module):
    """_hdemucs.py:292-293 `_HDecLayer.forward(x, skip, length)`: `z[..., self.pad : self.pad +
    length]` and `if z.shape[-1] != length`, where the caller passes `lengths.pop(-1)` from a
    `List[int]` of `x.shape[-1]` values."""

    def __init__(self):
        super().__init__()
        self.dec = _DecoderWithIntLength()

    def forward(self, x):
        lengths: list[int] = [x.shape[-1]]
        z = torch.cat([x, x, x], dim=-1)
        return self.dec(z, lengths.pop(-1)) + 1


PROBES = [
    (SliceByTensorLength(), lambda n: (torch.rand(n + 4, 2), torch.tensor([1, 2])), {}),
    (SliceByCeilTensor(), lambda n: (torch.rand(2, 3 * n),), {}),
    (IntOfShapeProduct(), lambda n: (torch.rand(n, 2, 4),), {}),
    (IntPlusRand(), lambda n: (torch.rand(2, 4 * n),), {}),
    (LayerDropItem(), lambda n: (torch.rand(n, 4),), {}),
    (TriggeredOr(), lambda n: (torch.rand(n, 4),), {}),
    (TriggeredOrOnly(), lambda n: (torch.rand(n, 4),), {}),
    (RangeOfTensorLength(), lambda n: (torch.rand(n, 4),), {}),
    (UniqueOfMasked(), lambda n: (torch.rand(n, 4),), {}),
    (RatioMask(), lambda n: (torch.rand(n, 2) + 0.1,), {}),
    (NonzeroAndWhere(), lambda n: (torch.rand(n, 4),), {}),
    (BiLSTM(), lambda n: (torch.rand(2, n, 4),), {}),
    (WarnOnDefaultArgument(), lambda n: (torch.rand(n, 4),), {}),
    (RequiresGradInForward(), lambda n: (torch.rand(n, 4),), {}),
    (RequiresGradThenBreak(), lambda n: (torch.rand(n, 4),), {}),
    (RequiresGradOffReturned(), lambda n: (torch.rand(n, 4),), {}),
    (RepeatInterleaveOutputSize(), lambda n: (torch.rand(n, 4),), {}),
    (RepeatInterleaveNoOutputSize(), lambda n: (torch.rand(n, 4),), {}),
    (JitTracingBranch(), lambda n: (torch.rand(n, 4),), {}),
    (FrameLoop(), lambda n: (torch.rand(2, n, 4),), {}),
    (IntLengthArgument(), lambda n: (torch.rand(2, 3, n),), {}),
]


def _anywhere(path: str) -> str | None:
    """A probe's break at any user line (its own file), not inside torch."""
    return None if "/torch/" in path else path.rsplit("/", 1)[-1]


def _in_package(path: str) -> str | None:
    """A break inside torchaudio or kornia, named from the package down."""
    return package_site(path, ("torchaudio", "kornia"))


def probe(module: nn.Module, inputs, kwargs: dict, breaks) -> str:
    compiled, nodes = counting_compile(module, breaks, dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(*inputs(3), **kwargs)
        first = list(nodes)
        reasons = break_sites(breaks.texts, _anywhere)
        compiled(*inputs(5), **kwargs)
    second = nodes[len(first) :]
    broke = f"yes: {'; '.join(reasons)}" if reasons else "no"
    return (
        f"| {type(module).__name__} | {broke} | {len(first)} graph(s), {sum(first)} ops | "
        f"{len(second)} new graph(s), {sum(second)} ops |"
    )


def real_torchaudio(breaks) -> None:
    """The sampled torchaudio sites on the real modules, tiny configs, CPU. Needs a copy of the
    torchaudio 2.11.0 wheel on sys.path with `lib/*.so` removed (built for another torch; without
    them torchaudio imports its Python code only)."""
    import torchaudio
    from torchaudio import models, transforms
    from torchaudio.models.wav2vec2 import components
    from torchaudio.pipelines._tts.impl import _GriffinLimVocoder

    emformer = models.Emformer(8, 2, 16, 1, segment_length=4, left_context_length=2, right_context_length=1)
    tacotron = models.Tacotron2(
        n_mels=8, n_symbol=20, symbol_embedding_dim=16, encoder_embedding_dim=16, encoder_n_convolution=1,
        decoder_rnn_dim=16, attention_rnn_dim=16, attention_hidden_dim=8, attention_location_n_filter=4,
        prenet_dim=8, postnet_n_convolution=1, postnet_embedding_dim=8, decoder_max_step=5,
    )  # fmt: skip
    wavernn = models.WaveRNN(
        upsample_scales=[2, 2], n_classes=8, hop_length=4, n_res_block=1, n_rnn=8, n_fc=8, kernel_size=3,
        n_freq=8, n_hidden=8, n_output=8,
    )  # fmt: skip
    masker = components.MaskGenerator(
        8, mask_prob=0.5, mask_selection="static", mask_other=0, mask_length=2, no_mask_overlap=True,
        mask_min_space=1, mask_channel_prob=0.0, mask_channel_selection="static", mask_channel_other=0,
        mask_channel_length=2, no_mask_channel_overlap=False, mask_channel_min_space=1,
    )  # fmt: skip
    wav2vec2 = torchaudio.models.wav2vec2_model(
        extractor_mode="group_norm", extractor_conv_layer_config=[(4, 10, 5)], extractor_conv_bias=False,
        encoder_embed_dim=8, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=3, encoder_pos_conv_groups=1,
        encoder_num_layers=2, encoder_num_heads=2, encoder_attention_dropout=0.0, encoder_ff_interm_features=16,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.1,
        aux_num_out=None,
    )  # fmt: skip
    vocoder = _GriffinLimVocoder()
    vocoder._griffin_lim.n_iter = 2
    cfloat = torch.cfloat
    runs = [
        ("Conformer", models.Conformer(8, 2, 16, 1, 3).eval(), (torch.rand(2, 10, 8), torch.tensor([10, 7]))),
        ("Emformer.forward", emformer.eval(), (torch.rand(2, 9, 8), torch.tensor([9, 7]))),
        ("Emformer.infer", emformer.infer, (torch.rand(2, 5, 8), torch.tensor([5, 5]), None)),
        ("Tacotron2", tacotron.eval(),
         (torch.randint(0, 20, (2, 6)), torch.tensor([6, 4]), torch.rand(2, 8, 5), torch.tensor([5, 5]))),
        ("DeepSpeech", models.DeepSpeech(n_feature=8, n_hidden=16, n_class=5).eval(), (torch.rand(2, 1, 6, 8),)),
        ("WaveRNN", wavernn.eval(), (torch.rand(1, 1, 16), torch.rand(1, 1, 8, 6))),
        ("HDemucs (hdemucs_low, 2 s)", models.hdemucs_low(sources=["a", "b"]).eval(), (torch.rand(1, 2, 88200),)),
        ("Vad", transforms.Vad(sample_rate=8000), (torch.rand(2, 4000) * 0.01,)),
        ("Resample", transforms.Resample(3, 2), (torch.rand(2, 30),)),
        ("Convolve", transforms.Convolve(), (torch.rand(2, 30), torch.rand(2, 5))),
        ("SlidingWindowCmn, 6 frames", transforms.SlidingWindowCmn(cmn_window=3), (torch.rand(1, 6, 4),)),
        ("SlidingWindowCmn, 12 frames", transforms.SlidingWindowCmn(cmn_window=3), (torch.rand(1, 12, 4),)),
        ("FrequencyMasking", transforms.FrequencyMasking(4), (torch.rand(1, 10, 6),)),
        ("MuLawEncoding, float input", transforms.MuLawEncoding(), (torch.rand(10),)),
        ("MuLawEncoding, int input (misuse)", transforms.MuLawEncoding(), (torch.randint(0, 3, (10,)),)),
        ("TimeStretch, complex input", transforms.TimeStretch(n_freq=5, fixed_rate=1.2),
         (torch.rand(1, 5, 10, dtype=cfloat),)),
        ("MVDR, no mask_n", transforms.MVDR(), (torch.rand(2, 5, 6, dtype=cfloat), torch.rand(5, 6))),
        ("Spectrogram", transforms.Spectrogram(n_fft=8), (torch.rand(1, 40),)),
        ("SpeedPerturbation", transforms.SpeedPerturbation(8000, [0.9, 1.1]), (torch.rand(1, 400),)),
        ("MaskGenerator, train, no_overlap", masker.train(),
         (torch.rand(2, 20, 8), torch.zeros(2, 20, dtype=torch.bool))),
        ("LogitGenerator", components.LogitGenerator(8, 5, 4, skip_masked=False, skip_nomask=True),
         (torch.rand(2, 6, 8), torch.randint(0, 5, (2, 6)), torch.rand(2, 6) > 0.5, torch.rand(2, 6) > 0.5)),
        ("Wav2Vec2Model, train, layer_drop 0.1", wav2vec2.train(), (torch.rand(1, 400),)),
        ("_GriffinLimVocoder", vocoder, (torch.rand(1, 80, 4),)),
    ]  # fmt: skip
    print("\n| torchaudio module (real code) | graphs, ops | break sites in torchaudio (innermost line) |")
    print("|---|---|---|")
    for label, fn, args in runs:
        compiled, nodes = counting_compile(fn, breaks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(*args)
        sites = break_sites(breaks.texts, _in_package)
        print(f"| {label} | {len(nodes)}, {sum(nodes)} | {'; '.join(sites) or '-'} |", flush=True)


def real_kornia(breaks) -> None:
    """The kornia sites that run without `kornia_rs` (only kornia.io needs it; a stub stands in)."""
    sys.modules.setdefault("kornia_rs", types.ModuleType("kornia_rs")).io = None
    from kornia.feature.matching import match_mnn, match_snn
    from kornia.filters import canny

    runs = [
        ("canny (hysteresis)", canny, (torch.rand(1, 1, 16, 16),)),
        ("match_mnn, rows <= cols", match_mnn, (torch.rand(5, 8), torch.rand(7, 8))),
        ("match_mnn, rows > cols", match_mnn, (torch.rand(7, 8), torch.rand(5, 8))),
        ("match_snn", match_snn, (torch.rand(6, 8), torch.rand(7, 8), 0.9)),
    ]
    print("\n| kornia function (real code) | break sites in kornia (innermost line) |")
    print("|---|---|")
    for label, fn, args in runs:
        torch._dynamo.reset()
        breaks.texts.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(fn, backend="eager")(*args)
        print(f"| {label} | {'; '.join(break_sites(breaks.texts, _in_package)) or '-'} |", flush=True)


def main() -> None:
    breaks = listen()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, backend eager, dynamic=False; sizes 3 then 5 (batch or sequence)\n")
    print("| probe | breaks (reasons) | size 3 | size 5 (recompiles) |")
    print("|---|---|---|---|")
    for module, inputs, kwargs in PROBES:
        print(probe(module, inputs, kwargs, breaks))
    args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
    if "--torchaudio" in args:
        sys.path.insert(0, args["--torchaudio"])
        real_torchaudio(breaks)
    if "--kornia" in args:
        sys.path.insert(0, args["--kornia"])
        real_kornia(breaks)


if __name__ == "__main__":
    main()
