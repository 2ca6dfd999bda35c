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
