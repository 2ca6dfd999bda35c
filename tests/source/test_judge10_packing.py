"""A missed class judge10 found on speechbrain 1.1.2 (bench/results/precision_untuned10.md,
nnet/RNN.py:41 and :59): packing a padded batch for an RNN. Dynamo (torch 2.13) skips
`torch.nn.utils.rnn.pack_padded_sequence`, `pad_packed_sequence` and `pack_sequence` (gb0007),
each alone and whatever the lengths' device; `pad_sequence` traces. FL108 flags the three calls,
in a helper the entry calls too."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import breaks_under_dynamo, lines

SOURCE = """
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence


    def pack(x, lengths):
        return pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)


    class Packed(nn.Module):
        def forward(self, x, lengths):
            packed = pack(x, lengths)
            out, _ = nn.utils.rnn.pad_packed_sequence(packed, batch_first=True)
            return out.sum()


    class Sequences(nn.Module):
        def forward(self, x):
            return torch.nn.utils.rnn.pack_sequence([x[0], x[1, :2]], enforce_sorted=False).data.sum()


    class Padded(nn.Module):
        def forward(self, x):
            return pad_sequence([x[0], x[1, :2]], batch_first=True).sum()
"""


def _run(name: str):
    namespace: dict = {}
    exec(compile(textwrap.dedent(SOURCE), "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    return namespace[name]()


def test_packing_calls_flagged():
    assert lines(SOURCE, "FL108") == [8, 14, 20]


def test_packing_breaks_and_padding_traces():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn

    x = torch.randn(2, 4, 3)
    lengths = torch.tensor([4, 2])
    assert breaks_under_dynamo(_run("Packed"), x, lengths)
    assert breaks_under_dynamo(_run("Sequences"), x)
    assert not breaks_under_dynamo(_run("Padded"), x)
    packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    assert breaks_under_dynamo(lambda p: rnn.pad_packed_sequence(p, batch_first=True)[0].sum(), packed)


def test_unpacking_a_packed_sequence_is_flagged_and_breaks():
    # review12: `unpack_sequence` is skipped as the other three are (gb0007, torch 2.13).
    source = (
        "import torch\nfrom torch import nn\nfrom torch.nn.utils.rnn import unpack_sequence\n\n\n"
        "class Unpacked(nn.Module):\n"
        "    def forward(self, packed, y):\n"
        "        return y + 1, unpack_sequence(packed)\n"
    )
    assert lines(source, "FL108") == [8]
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn

    namespace: dict = {}
    exec(compile(source, "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    packed = rnn.pack_sequence([torch.randn(3, 2), torch.randn(2, 2)])
    assert breaks_under_dynamo(namespace["Unpacked"](), packed, torch.randn(2))
