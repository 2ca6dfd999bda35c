"""Dynamo checks behind the verdicts of the seventh and eighth samples (seeds 30, 31) of
bench/results/real_breaks_precision.md (prec31, issue 11): each probe compiles the installed package
code of one sampled finding, or a few-line reproduction of its pattern, (torch 2.13 CPU, backend eager,
dynamic=False) on the input a normal call gives and, where the verdict turns on it, on the input of the
other path. A row prints the graphs, their op count and the lines where dynamo logged a break (in the
package, or "probes:N" for a line of this file).

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec31_probes.py

Needs the corpus packages diffusers, kornia and transformers. The last three rows are seed 31's (prec31).
"""

from __future__ import annotations

import torch
from break_probe import print_probes

SCRIPT = "prec31_probes.py"
PACKAGES = ("diffusers", "kornia", "transformers")


def marian():
    """Sample 1 (transformers `marian/modeling_marian.py:957`): a tiny `MarianMTModel` called with `labels`,
    once as the Trainer calls it (no `use_cache`, so the parameter stays None and the warning's `if use_cache`
    is False) and once with `use_cache=True` passed together with the labels (what the warning corrects)."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
        pad_token_id=0, decoder_start_token_id=1, eos_token_id=2,
    )  # fmt: skip
    model = MarianMTModel(config).eval()
    ids = torch.randint(3, 64, (1, 6))
    return (
        lambda ids, labels: model(input_ids=ids, labels=labels).loss,
        lambda ids, labels: model(input_ids=ids, labels=labels, use_cache=True).loss,
        (ids, ids.clone()),
    )


def pocket_conv(pad_mode: str):
    """Sample 44 (transformers `pocket_tts_audio_tokenizer/...py:301`): one non-causal
    `PocketTTSAudioTokenizerConv1d` (kernel 4, stride 1, so a 3-frame `padding_total` buffer) in the
    config's default `pad_mode` ("constant", `_pad1d` returns before the test) and in "reflect" (a
    documented value, encodec's default), where `length <= max_pad` compares with a buffer-derived pad."""
    from transformers import PocketTTSAudioTokenizerConfig
    from transformers.models.pocket_tts_audio_tokenizer.modeling_pocket_tts_audio_tokenizer import (
        PocketTTSAudioTokenizerConv1d,
    )

    config = PocketTTSAudioTokenizerConfig(pad_mode=pad_mode, use_causal_conv=False)
    conv = PocketTTSAudioTokenizerConv1d(config, 2, 2, kernel_size=4).eval()
    return conv, (torch.randn(1, 2, 8),)


def flash_lengths(max_seqlen_q, max_seqlen_k):
    """Sample 33 (transformers `modeling_flash_attention_utils.py:739`): the varlen lengths turned into
    ints with `.item()` only while tracing (`is_tracing`), as `_process_flash_attention_kwargs` does."""
    from transformers.utils.import_utils import is_tracing

    if not isinstance(max_seqlen_q, int) and is_tracing(max_seqlen_q):
        max_seqlen_q = max_seqlen_q.item()
    if not isinstance(max_seqlen_k, int) and is_tracing(max_seqlen_k):
        max_seqlen_k = max_seqlen_k.item()
    return torch.ones(max_seqlen_q + max_seqlen_k)


def kornia_descriptor(scripted: bool, dtype: torch.dtype):
    """Seed 31 #17 (kornia `feature/integrated.py:113`): `_run_descriptor` with a descriptor whose
    parameters must be cast to the patches' dtype (float64 patches, float32 module), the module plain
    or TorchScript (whose `copy.deepcopy` path breaks inside the `try`, sending the frame to eager)."""
    from kornia.feature.integrated import _run_descriptor
    from torch import nn

    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten())
    module = torch.jit.script(net) if scripted else net
    return lambda patches: _run_descriptor(module, patches), (torch.randn(2, 1, 8, 8, dtype=dtype),)


def main() -> None:
    plain, with_cache, marian_args = marian()
    lengths = (torch.tensor(5), torch.tensor(7))
    runs = [
        ("tiny MarianMTModel, labels, use_cache not passed", plain, marian_args),
        ("tiny MarianMTModel, labels and use_cache=True", with_cache, marian_args),
        ("pocket_tts Conv1d, pad_mode constant (default)", *pocket_conv("constant")),
        ("pocket_tts Conv1d, pad_mode reflect", *pocket_conv("reflect")),
        ("flash-attention varlen lengths under is_tracing", flash_lengths, lengths),
        (
            "seed 31: kornia _run_descriptor, float64 patches, plain module",
            *kornia_descriptor(False, torch.float64),
        ),
        (
            "seed 31: kornia _run_descriptor, float64 patches, TorchScript module",
            *kornia_descriptor(True, torch.float64),
        ),
        (
            "seed 31: kornia _run_descriptor, float32 patches, TorchScript module",
            *kornia_descriptor(True, torch.float32),
        ),
    ]
    print_probes(runs, SCRIPT, PACKAGES)


if __name__ == "__main__":
    main()
