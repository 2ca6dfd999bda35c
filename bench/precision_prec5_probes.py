"""Dynamo behind the recall sites prec5 adds (pattern copies; torch 2.13 CPU, backend eager).

    PYTHONPATH=. python bench/precision_prec5_probes.py

Each probe runs eagerly, then under `torch.compile(backend="eager")`; it prints dynamo's graph count and
the gb codes of its breaks. (`fullgraph=True` is no check here: on torch 2.13 it compiled the `.item()`
and `.sum()`-as-size probes without error, where the default compile breaks on them.)
"""

from __future__ import annotations

import re
from itertools import zip_longest

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence


def pad_at_dim(t, pad, dim=-1, value=0.0):  # x-transformers autoregressive_wrapper.py:62
    if pad == (0, 0):
        return t
    return F.pad(t, (*((0, 0) * (-dim - 1)), *pad), value=value)


class PadEquality(nn.Module):
    def forward(self, t, lens):
        return pad_at_dim(t, ((t.shape[1] - lens).amax(), 0), dim=1)


class ZipLongest(nn.Module):  # entropy_based_tokenizer.py:208-213
    def forward(self, seq, lens):
        token_lengths = pad_sequence([seq[0], seq[1, :3]], batch_first=True)
        out = []
        for one_seq, _one_len, one_token_length in zip_longest(seq, lens, token_lengths):
            out.append(one_seq.sum() + one_token_length[one_token_length > 0].sum())
        return out


class Preprocess(nn.Module):  # e3nn v2106 SimpleNetwork.preprocess / forward
    def preprocess(self, data: dict[str, torch.Tensor]):
        return data["batch"], data["x"]

    def forward(self, data: dict[str, torch.Tensor]):
        batch, x = self.preprocess(data)
        return torch.zeros(int(batch.max()) + 1).index_add(0, batch, x)


class NewZerosSum(nn.Module):  # Qwen3-VL `img_embed.new_zeros(visual_pos_masks.sum(), d)`
    def forward(self, x, image_mask, video_mask):
        visual_pos_masks = image_mask | video_mask
        return x.new_zeros(visual_pos_masks.sum(), x.shape[-1])


def main() -> None:
    torch.manual_seed(0)
    probes = {
        "PadEquality (ar:63)": (PadEquality(), (torch.randn(2, 5), torch.tensor([3, 5]))),
        "ZipLongest (entropy 213)": (ZipLongest(), (torch.randint(0, 3, (2, 5)), torch.tensor([5, 3]))),
        "Preprocess (v2106 103)": (Preprocess(), ({"batch": torch.tensor([0, 0, 1]), "x": torch.randn(3)},)),
        "NewZerosSum (qwen3_vl 1202)": (
            NewZerosSum(),
            (torch.randn(4, 8), torch.tensor([True, False, False, True]), torch.tensor([False] * 4)),
        ),
    }
    print(f"torch {torch.__version__}")
    for name, (module, args) in probes.items():
        module(*args)  # eager runs
        torch._dynamo.reset()
        counters = torch._dynamo.utils.counters
        counters.clear()
        torch.compile(module, backend="eager")(*args)
        breaks = {**counters["graph_break"], **counters["unimplemented"]}
        codes = sorted({code for reason in breaks for code in re.findall(r"gb\d{4}", reason)})
        graphs = counters["stats"]["unique_graphs"]
        print(f"| {name} | {graphs} graphs | {', '.join(codes) or 'no break'} |")


if __name__ == "__main__":
    main()
