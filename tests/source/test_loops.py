"""FL107: Python loops over a tensor's rows; loops over modules, shapes and constants are fine."""

from __future__ import annotations

from source_rules_helpers import lines

SRC = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x: torch.Tensor, boxes: torch.Tensor, features: list[torch.Tensor]):
        out = torch.empty_like(x)
        for row in x:
            out = out + row
        for i, b in enumerate(boxes):
            out = out + b.sum()
        for i in range(x.shape[0]):
            out[i] = x[i] * 2
        batch, seq_len, _ = x.shape
        for t in range(seq_len):
            out[:, t] = x[:, t].cumsum(-1)
        for step in x.unbind(1):
            out = out + step
        return out


class Fine(nn.Module):
    def forward(self, x, features: list[torch.Tensor], hidden_states=None):
        for layer in self.layers:
            x = layer(x)
        for feature in features:
            x = x + feature.mean()
        for d in range(x.dim()):
            x = x.flip(d)
        for size in x.shape:
            x = x + size
        for i in range(x.shape[0]):
            print(i)
        for chunk in x.chunk(4, dim=-1):
            x = x + chunk
        if isinstance(hidden_states, (list, tuple)):
            for h in hidden_states:
                x = x + h
        for h in features[::-1]:
            x = x + h
        return x
"""


def test_loops_over_tensor_rows_are_flagged():
    assert lines(SRC, "FL107") == [8, 10, 12, 15, 17]


def test_a_parameter_only_guessed_to_be_a_tensor_is_not_iterated_as_one():
    src = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, encoder_hidden_states):
        for h, proj in zip(encoder_hidden_states, self.projections):
            pass
        return encoder_hidden_states
"""
    assert lines(src, "FL107") == []


def test_loops_over_modules_lists_shapes_and_chunks_are_not_flagged():
    assert [line for line in lines(SRC, "FL107") if line > 20] == []


STATIC = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, ids: torch.Tensor, w_kv: torch.Tensor, x: torch.Tensor, latents: torch.Tensor,
                paddings: torch.Tensor):
        n_axes = ids.shape[-1]
        out = []
        for i in range(n_axes):
            out.append(ids[:, i].float())
        c_len = w_kv.shape[2]
        s = w_kv[:, :, 0]
        for t in range(c_len):
            s = s @ w_kv[:, :, t]
        for coord in ids.unbind(-1):
            out.append(coord)
        for i in range(self.num_layers):
            x = x + ids[i]
        if isinstance(latents, list):
            for latent, pad in zip(latents, paddings):
                out.append(latent + pad)
        pads = [None] * 3
        for row, pad in zip(x, pads):
            out.append(row)
        per_level = [level[0] for level in latents]
        for level, anchors in zip(per_level, paddings):
            out.append(level + anchors)
        return out, s
"""


def test_loops_over_small_static_dims_and_python_lists_are_not_flagged():
    # dynamo unrolls each into the same few ops at every input size (bench/precision_probes.py).
    assert lines(STATIC, "FL107") == []


DATA_SIZED = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x: torch.Tensor, v: torch.Tensor):
        out = torch.empty_like(x)
        bsz = x.shape[0]
        for i in range(bsz):
            out[i] = x[i] * 2
        for t in range(x.size(1)):
            out[:, t] = x[:, t] * 2
        for i in range(len(x)):
            out[i] = out[i] + 1
        B, C, T, H, W = v.shape
        for t in range(T):
            v[:, :, t] = v[:, :, t] * 2
        *_, seq_len, dim = x.shape
        for t in range(seq_len):
            out[..., t, :] = x[..., t, :]
        for step in x.unbind(1):
            out = out + step
        return out, v
"""


def test_loops_over_batch_sequence_and_time_dims_are_flagged():
    assert lines(DATA_SIZED, "FL107") == [9, 11, 13, 16, 19, 21]


CLASS_DIM = """
import torch
from torch import nn

class Loss(nn.Module):
    def forward(self, y_pred: torch.Tensor, y_true: torch.Tensor):
        loss = 0
        num_classes = y_pred.size(1)
        for cls in range(num_classes):
            loss = loss + (y_pred[:, cls] - (y_true == cls).float()).abs().mean()
        b, c, h, w = y_pred.shape
        for k in range(c):
            loss = loss + y_pred[:, k].mean()
        n_tokens = y_pred.size(1)
        for t in range(n_tokens):
            loss = loss + y_pred[:, t].mean()
        num_classes_in_batch = y_pred.size(0)
        for i in range(num_classes_in_batch):
            loss = loss + y_pred[i].mean()
        return loss
"""


def test_a_loop_over_a_class_or_channel_dim_is_not_flagged():
    # Dim 1 named a class or channel count is the model's: one graph of the same size at batch
    # 2 and 4 (smp's FocalLoss, precision_untuned2.md s8). A dim-1 size named a sequence, and a
    # dim 0 (batch) size whatever its name, stay flagged.
    assert lines(CLASS_DIM, "FL107") == [15, 18]
