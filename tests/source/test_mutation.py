"""FL104 deepcopy and FL105 requires_grad changes inside traced code."""

from __future__ import annotations

from source_rules_helpers import lines

SRC = """
import copy
from copy import deepcopy as dc
import torch
from torch import nn

class M(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = copy.deepcopy(inner)
        self.inner.requires_grad_(False)

    def forward(self, x, cache=None):
        cache = copy.deepcopy(cache)
        other = dc(cache)
        if self.training:
            x.requires_grad = True
            self.inner.weight.requires_grad_(True)
        if x.requires_grad:
            x = x.clone()
        return self.inner(x), other
"""


def test_deepcopy_in_forward_is_flagged_not_in_init():
    assert lines(SRC, "FL104") == [14, 15]


def test_requires_grad_changes_in_forward_are_flagged_not_reads_or_init():
    assert lines(SRC, "FL105") == [17, 18]


def test_turning_requires_grad_off_on_a_detached_tensor_is_not_flagged():
    # dynamo traces `.detach().requires_grad_(False)` with no break; on a tensor that requires grad
    # (a parameter, an input) `requires_grad_(False)` breaks, as `()` does (torch 2.13)
    src = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        a = x.detach().requires_grad_(False)\n"
        "        b = x.detach().requires_grad_(requires_grad=False)\n"
        "        c = x.detach().requires_grad_()\n"
        "        x.requires_grad_(False)\n"
        "        return a + b + c\n"
    )
    assert lines(src, "FL105") == [8, 9]


def test_turning_requires_grad_off_on_a_tensor_a_factory_made_is_not_flagged():
    # MONAI's adversarial loss: a label tensor made from a constant, then requires_grad_(False);
    # dynamo keeps one graph (torch 2.13); a factory asked for grad still counts
    src = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        label = torch.tensor(1.0).fill_(0.5).type(x.type()).to(x.device)\n"
        "        label.requires_grad_(False)\n"
        "        made = torch.zeros(3, requires_grad=True)\n"
        "        made.requires_grad_(False)\n"
        "        return x * label + made\n"
    )
    assert lines(src, "FL105") == [9]
