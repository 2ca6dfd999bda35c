"""Dynamo checks behind the verdicts of bench/results/precision_untuned30.md (prec30, issue 11): the
installed code of neuralforecast 3.3.0 and torchtune 0.6.1 (or a few-line reproduction of a sampled line
where the model needs an LLM checkpoint), compiled with torch 2.13 CPU, backend eager, dynamic=False.
A row prints the graphs, their op count and the lines where dynamo logged a break (in the package, or
"probes:N" for a line of this file); the "export" rows run `torch.export.export` instead and print
whether it captured the call.

    cd bench && PYTHONPATH=$PWD/..:$PWD PROBE_VENV/bin/python untuned30_probes.py

Needs a venv with torch 2.13.0, neuralforecast 3.3.0 and torchtune 0.6.1 (installed --no-deps) and
pytorch-lightning, coreforecast, utilsforecast, pandas, scipy, torchao 0.10; ray and optuna (imported
by neuralforecast's auto-tuning module only) are stubbed. torchtune's package `__init__`s import
datasets and torchvision, so its self-contained files are loaded by path instead.
"""

from __future__ import annotations

import importlib
import os
import sys
import types

import torch
from break_probe import print_probes
from torch import nn

SCRIPT = "untuned30_probes.py"
PACKAGES = ("neuralforecast", "torchtune")


class _Stub(types.ModuleType):
    """An absent optional package: any attribute is a class that accepts any arguments."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(
            name, (), {"__init__": lambda self, *a, **k: None, "__call__": lambda self, *a, **k: None}
        )


def stub_tuning_packages() -> None:
    for name in ("ray", "ray.air", "ray.tune", "ray.tune.integration", "ray.tune.integration.pytorch_lightning",
                 "ray.tune.search", "ray.tune.search.basic_variant", "optuna"):  # fmt: skip
        sys.modules.setdefault(name, _Stub(name))


def torchtune_file(relative: str):
    """A torchtune module imported without running the package `__init__`s on its path (they import
    datasets and torchvision): each parent package is registered bare, with its real folder."""

    import site

    root = next(f"{r}/torchtune" for r in site.getsitepackages() if os.path.isdir(f"{r}/torchtune"))
    parts = relative[:-3].split("/")
    for depth in range(len(parts)):
        name = ".".join(["torchtune", *parts[:depth]])
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = ["/".join([root, *parts[:depth]])]
            sys.modules[name] = package
    return importlib.import_module(".".join(["torchtune", *parts]))


# --- neuralforecast -----------------------------------------------------------------------------------


def autocorrelation():
    """#1 (`autoformer.py:63`): Autoformer's `AutoCorrelation` in training (`time_delay_agg_training`)."""
    from neuralforecast.models.autoformer import AutoCorrelation

    return AutoCorrelation(factor=1), tuple(torch.randn(2, 16, 2, 4) for _ in range(3)) + (None,)


def prob_attention():
    """#5, #6 (`informer.py:160-161`): Informer's `ProbAttention`, `np.ceil(np.log(L)).astype("int").item()`
    on the static key and query lengths."""
    from neuralforecast.models.informer import ProbAttention

    return ProbAttention(mask_flag=False, factor=3), tuple(torch.randn(2, 16, 2, 4) for _ in range(3)) + (
        None,
    )


def numpy_length(x):
    """#5's expression alone: numpy math on a static length, `.item()` of the result as a size."""
    import numpy as np

    u = 3 * np.ceil(np.log(x.shape[1])).astype("int").item()
    return x[:, :u] * 2


def res_lstm():
    """#3 (`dilated_rnn.py:88`): DilatedRNN's `ResLSTMLayer` (`cell_type="ResLSTM"`, a documented option),
    whose cell compares its two size buffers in `if self.input_size == self.hidden_size`."""
    from neuralforecast.models.dilated_rnn import ResLSTMLayer

    layer = ResLSTMLayer(4, 4)
    hidden = (torch.zeros(2, 4), torch.zeros(2, 4))
    return layer, (torch.randn(3, 2, 4), hidden)


def stad_sharp():
    """#9 (`softssharp.py:58`): SOFTS#'s `STADSharp` in training, `torch.rand(1).item() < pe_keep_prob`."""
    from neuralforecast.models.softssharp import STADSharp

    return STADSharp(8, 4), (torch.randn(2, 3, 8),)


class Recurrent(nn.Module):
    """#2, #4, #7, #8, #10, #11: a forward that runs an `nn.LSTM` / `nn.GRU` encoder, as the six
    neuralforecast models do with `self.hist_encoder` (`batch_first=True`)."""

    def __init__(self, kind) -> None:
        super().__init__()
        self.hist_encoder = kind(4, 8, num_layers=2, batch_first=True)
        self.proj = nn.Linear(8, 1)

    def forward(self, x):
        out, _ = self.hist_encoder(x * 2)
        return self.proj(out)


def timellm_prompt(x_enc):
    """#12-#17 (`timellm.py:427-439`): Time-LLM's prompt loop, lines 420-440 with the prompt text cut
    (the model itself needs an LLM checkpoint); `x_enc` is `(B * N, T, 1)`."""
    min_values = torch.min(x_enc, dim=1)[0]
    max_values = torch.max(x_enc, dim=1)[0]
    medians = torch.median(x_enc, dim=1).values
    trends = x_enc.diff(dim=1).sum(dim=1)
    prompt = []
    for b in range(x_enc.shape[0]):
        min_values_str = str(min_values[b].tolist()[0])
        max_values_str = str(max_values[b].tolist()[0])
        median_values_str = str(medians[b].tolist()[0])
        prompt.append(
            f"{min_values_str} {max_values_str} {median_values_str} {'up' if trends[b] > 0 else 'down'}"
        )
    return x_enc * len(prompt)


def times_block():
    """#18 (`timesnet.py:60`): TimesNet's `FFT_for_Period`, the installed function (`.cpu().numpy()` of
    the top-k periods, then `x.shape[1] // top_list`)."""
    from neuralforecast.models.timesnet import FFT_for_Period

    return FFT_for_Period, (torch.randn(2, 16, 3),)


def times_block_module():
    """#18 through its caller: TimesNet's `TimesBlock`, whose loop tests `(input_size + h) % period`."""
    from neuralforecast.models.timesnet import TimesBlock

    block = TimesBlock(input_size=12, h=4, k=2, hidden_size=4, conv_hidden_size=4, num_kernels=2)
    return block, (torch.randn(2, 16, 4),)


# --- torchtune ----------------------------------------------------------------------------------------


def tiled_position_embedding(export_version: bool, tiled_token: bool):
    """#19-#24 (`models/clip/_position_embeddings.py:460-469`, `:650-658`) and #27-#32
    (`modules/_export/_position_embeddings.py:193-198`, `:635-640`): the loop over `aspect_ratio` rows in
    `TiledTokenPositionalEmbedding.forward` and `TilePositionalEmbedding.forward`, in the training module
    and in the export-friendly copy."""
    where = (
        "modules/_export/_position_embeddings.py" if export_version else "models/clip/_position_embeddings.py"
    )
    if tiled_token:
        module = torchtune_file(where).TiledTokenPositionalEmbedding(4, 8, tile_size=8, patch_size=4)
    else:
        module = torchtune_file(where).TilePositionalEmbedding(4, 8)
    x = torch.randn(2, 4, 5, 8)
    return module, (x, torch.tensor([[2, 2], [1, 2]]))


def slice_bound(embedding, aspect_ratio):
    """#21, #24 (`models/clip/_position_embeddings.py:469`, `:658`) alone: a row of `aspect_ratio` as
    slice bounds (in the module the `int()` a line above breaks first)."""
    n_tiles_h, n_tiles_w = aspect_ratio[0]
    return embedding[:n_tiles_h, :n_tiles_w] * 2


def exported(module, args):
    """`torch.export.export` of `module` on `args` (strict, as ExecuTorch exports): the ops captured, or the
    error."""
    try:
        program = torch.export.export(module, args)
    except Exception as exc:
        return f"export ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:90]}"
    return f"exported, {sum(1 for n in program.graph.nodes if n.op == 'call_function')} ops"


def nan_cond(y):
    """#33 (`modules/_export/attention.py:316`): `torch.cond(torch.isnan(y).all().item(), ...)`, the
    export attention's choice between a fresh k/v and the cache."""
    return torch.cond(torch.isnan(y).all().item(), lambda t: t * 0, lambda t: t + 1, (y,))


def layer_dropout():
    """#34, #35 (`modules/layer_dropout.py:81-86`): `LayerDropout(prob=0.5)` around a Linear, training."""
    dropout = torchtune_file("modules/layer_dropout.py").LayerDropout(prob=0.5)
    linear = nn.Linear(4, 4)

    class Wrapped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dropout, self.linear = dropout, linear

        def forward(self, x):
            return self.dropout(self.linear, x)

    return Wrapped(), (torch.randn(6, 4),)


def kd_loss(name: str):
    """#36, #37 (`modules/loss/kd_losses.py:59`, `:114`): the KD losses, `normalize=True` (the default)."""
    loss = getattr(torchtune_file("modules/loss/kd_losses.py"), name)()
    return loss, (torch.randn(6, 10), torch.randn(6, 10), torch.tensor([1, 2, -100, 3, 4, 5]))


def fusion_embedding():
    """#39 (`modules/model_fusion/_fusion_layers.py:269`): `FusionEmbedding` on ids from both vocabularies."""
    module = torchtune_file("modules/model_fusion/_fusion_layers.py").FusionEmbedding(10, 4, 8)
    return module, (torch.tensor([[1, 2, 11, 3], [12, 4, 5, 6]]),)


def early_fusion_embed(tokens, encoder_token_ids):
    """#38 (`modules/model_fusion/_early_fusion.py:198`): `_decoder_embed`'s lines (the class needs a
    decoder and encoders)."""
    is_text = ~torch.isin(tokens, encoder_token_ids)
    text_tokens = torch.masked_select(tokens, is_text)
    return text_tokens.float() * 2


class ChunkedOutput(nn.Module):
    """#40 (`modules/transformer.py:656`): `unembed` with `num_output_chunks > 0`, which calls the
    `@torch.compiler.disable`d `chunked_output` (the recipes set the chunks for their chunked loss)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.output, self.num_output_chunks = nn.LayerNorm(8), nn.Linear(8, 16), 2

    @torch.compiler.disable
    def chunked_output(self, h):
        return [self.output(chunk) for chunk in h.chunk(self.num_output_chunks, dim=1)]

    def forward(self, h):
        return self.chunked_output(self.norm(h * 2))


def cases() -> list:
    stub_tuning_packages()
    return [
        ("train neuralforecast AutoCorrelation (Autoformer)", *autocorrelation()),
        ("neuralforecast AutoCorrelation eval", *autocorrelation()),
        ("neuralforecast ProbAttention (Informer)", *prob_attention()),
        ("numpy on a static length, .item() as a slice bound", numpy_length, (torch.randn(2, 16),)),
        ("neuralforecast ResLSTMLayer (DilatedRNN cell_type ResLSTM)", *res_lstm()),
        ("train neuralforecast STADSharp (SOFTS#)", *stad_sharp()),
        ("neuralforecast STADSharp eval", *stad_sharp()),
        ("nn.LSTM encoder", Recurrent(nn.LSTM), (torch.randn(2, 5, 4),)),
        ("nn.GRU encoder", Recurrent(nn.GRU), (torch.randn(2, 5, 4),)),
        ("Time-LLM prompt loop, 4 rows", timellm_prompt, (torch.randn(4, 16, 1),)),
        ("neuralforecast FFT_for_Period (TimesNet)", *times_block()),
        ("neuralforecast TimesBlock (TimesNet)", *times_block_module()),
        ("tensor row as slice bounds", slice_bound, (torch.randn(4, 4, 3), torch.tensor([[2, 3]]))),
        ("torchtune TiledTokenPositionalEmbedding", *tiled_position_embedding(False, True)),
        ("torchtune TilePositionalEmbedding", *tiled_position_embedding(False, False)),
        (
            "torchtune _export TiledTokenPositionalEmbedding, torch.compile",
            *tiled_position_embedding(True, True),
        ),
        ("torchtune _export TilePositionalEmbedding, torch.compile", *tiled_position_embedding(True, False)),
        ("torch.cond on isnan(y).all().item(), torch.compile", nan_cond, (torch.randn(2, 3),)),
        ("train torchtune LayerDropout(prob=0.5)", *layer_dropout()),
        ("torchtune ForwardKLLoss", *kd_loss("ForwardKLLoss")),
        ("torchtune ReverseKLLoss", *kd_loss("ReverseKLLoss")),
        ("torchtune FusionEmbedding", *fusion_embedding()),
        (
            "EarlyFusion _decoder_embed lines",
            early_fusion_embed,
            (torch.tensor([[1, 2, 90, 3]]), torch.tensor([90])),
        ),
        ("torchtune unembed with chunked output", ChunkedOutput(), (torch.randn(2, 4, 8),)),
    ]


def export_rows() -> None:
    print("\n| export (torch.export.export, strict) | result |\n|---|---|")
    for label, (module, args) in [
        ("torchtune _export TiledTokenPositionalEmbedding", tiled_position_embedding(True, True)),
        ("torchtune _export TilePositionalEmbedding", tiled_position_embedding(True, False)),
        ("torchtune TiledTokenPositionalEmbedding (training module)", tiled_position_embedding(False, True)),
    ]:
        print(f"| {label} | {exported(module.eval(), args)} |", flush=True)

    class Cond(nn.Module):
        def forward(self, y):
            return nan_cond(y)

    print(f"| torch.cond on isnan(y).all().item() | {exported(Cond(), (torch.randn(2, 3),))} |", flush=True)


if __name__ == "__main__":
    print_probes(cases(), SCRIPT, PACKAGES)
    export_rows()
