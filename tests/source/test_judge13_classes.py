"""Classes judge13 found on asteroid 0.7.0 / asteroid-filterbanks 0.4.0
(bench/results/precision_untuned11.md), each checked against dynamo (torch 2.13, CPU):

- an RNN module built by name (`getattr(nn, rnn_type)(...)`, asteroid's `SingleRNN`) breaks as
  `nn.LSTM(...)` does (gb0014) when every name `rnn_type` can hold is an RNN; one built by a name
  that may be anything (an activation) is left alone;
- settings queries dynamo calls as torch ops returning a Python value (`torch._C._is_tracing()`,
  asteroid's `is_tracing`) break (gb0208); `torch.jit.is_tracing()` traces;
- a comprehension indexing a tensor with each element of a tensor the function computed
  (`[perms[m] for m in min_idx]`, asteroid's PIT) reads each 0-d element on the host (gb0033);
- a def nested in a forward that only ever receives sizes (`parts(range(n), k, m)`) tests them on
  the host: no FL102, and dynamo traces it; the look-alike handed a tensor breaks.
"""

from __future__ import annotations

import pytest
from source_rules_helpers import breaks_under_dynamo, dynamo_graphs, lines, load_snippet

RNN_BY_NAME = """
    import torch
    from torch import nn


    class SingleRNN(nn.Module):
        def __init__(self, rnn_type, size):
            super().__init__()
            assert rnn_type.upper() in ["RNN", "LSTM", "GRU"]
            rnn_type = rnn_type.upper()
            self.rnn = getattr(nn, rnn_type)(size, size, batch_first=True)

        def forward(self, x):
            self.rnn.flatten_parameters()
            return self.rnn(x)[0]


    class Activated(nn.Module):
        def __init__(self, activation="ReLU"):
            super().__init__()
            self.act = getattr(nn, activation)()

        def forward(self, x):
            return self.act(x)


    class Chosen(nn.Module):
        def __init__(self, kind="GRU", size=4):
            super().__init__()
            self.rnn = getattr(nn, kind)(size, size)

        def forward(self, x):
            return self.rnn(x)[0]
"""


def test_rnn_built_by_name_is_flagged_where_first_touched():
    assert lines(RNN_BY_NAME, "FL108") == [14, 33]


def test_rnn_built_by_name_breaks_and_activation_traces():
    torch = pytest.importorskip("torch")
    ns = load_snippet(RNN_BY_NAME)
    x = torch.randn(2, 5, 4)
    assert breaks_under_dynamo(ns["SingleRNN"]("gru", 4), x)
    assert breaks_under_dynamo(ns["Chosen"](), x)
    assert not breaks_under_dynamo(ns["Activated"](), x)


def test_rnn_name_that_may_be_anything_is_not_flagged():
    source = RNN_BY_NAME.replace('assert rnn_type.upper() in ["RNN", "LSTM", "GRU"]', "pass")
    assert lines(source, "FL108") == [33]


QUERIES = """
    import torch
    from torch import nn


    def is_tracing():
        return torch._C._is_tracing()


    class Tracing(nn.Module):
        def forward(self, x):
            y = x + 1
            if is_tracing():
                return y
            return y * 2


    class JitTracing(nn.Module):
        def forward(self, x):
            y = x + 1
            if torch.jit.is_tracing():
                return y
            return y * 2


    class Threads(nn.Module):
        def forward(self, x):
            y = x + 1
            return y * torch.get_num_threads()
"""


def test_host_queries_flagged_and_break():
    assert lines(QUERIES, "FL108") == [7, 29]
    torch = pytest.importorskip("torch")
    ns = load_snippet(QUERIES)
    x = torch.randn(3)
    assert dynamo_graphs(ns["Tracing"](), x)[0] != 1
    assert dynamo_graphs(ns["Threads"](), x)[0] != 1
    assert dynamo_graphs(ns["JitTracing"](), x)[0] == 1


PIT = """
    import torch
    from torch import nn


    class Permutations(nn.Module):
        def forward(self, losses, perms):
            min_loss, min_idx = torch.min(losses, dim=1)
            return torch.stack([perms[m] for m in min_idx], dim=0)


    class Levels(nn.Module):
        def forward(self, levels, index):
            return torch.stack([index[t] for t in levels])
"""


def test_comprehension_indexing_a_tensor_with_tensor_elements():
    assert lines(PIT, "FL107") == [9]
    torch = pytest.importorskip("torch")
    ns = load_snippet(PIT)
    perms = torch.tensor([[0, 1], [1, 0]])
    assert dynamo_graphs(ns["Permutations"](), torch.randn(3, 2), perms)[0] != 1
    # `levels` guessed a tensor is a list of index tensors here: one graph
    levels = [torch.tensor([0]), torch.tensor([1])]
    assert dynamo_graphs(ns["Levels"](), levels, torch.randn(2, 3))[0] == 1


NESTED = """
    import itertools
    import torch
    from torch import nn


    class MixtureLoss(nn.Module):
        def forward(self, est, targets):
            nmix, nsrc = targets.shape[1], est.shape[1]

            def parts(lst, k, l):
                if l == 0:
                    yield []
                else:
                    for c in itertools.combinations(lst, k):
                        rest = [x for x in lst if x not in c]
                        for r in parts(rest, k, l - 1):
                            yield [list(c), *r]

            chosen = list(parts(range(nsrc), nsrc // nmix, nmix))
            return torch.stack([est[:, list(p[0])].sum(1) for p in chosen], 1)


    class Counted(nn.Module):
        def forward(self, est, count):
            def scaled(y, l):
                if l == 0:
                    return y
                return y * 2

            return scaled(est, count.sum())
"""


def test_nested_def_with_host_arguments_only():
    assert lines(NESTED, "FL102") == [27]
    torch = pytest.importorskip("torch")
    ns = load_snippet(NESTED)
    est = torch.randn(2, 4, 5)
    assert dynamo_graphs(ns["MixtureLoss"](), est, torch.randn(2, 2, 5))[0] == 1
    assert dynamo_graphs(ns["Counted"](), est, torch.tensor([0, 1]))[0] != 1


def test_nested_def_handed_on_as_a_value_is_not_decided():
    source = NESTED.replace(
        "chosen = list(parts(range(nsrc), nsrc // nmix, nmix))",
        "chosen = list(parts(range(nsrc), nsrc // nmix, nmix)); handed = parts",
    )
    assert 12 in lines(source, "FL102")


ITEM_STORED = """
    import torch
    from torch import nn


    class Embedding(nn.Module):
        def __init__(self, input_dim, cat_idxs):
            super().__init__()
            self.continuous_idx = torch.ones(input_dim, dtype=torch.bool)
            self.continuous_idx[cat_idxs] = 0
            self.layers = nn.ModuleList([nn.Identity() for _ in range(input_dim)])

        def forward(self, x):
            cols = []
            for i, is_continuous in enumerate(self.continuous_idx):
                if is_continuous:
                    cols.append(x[:, i])
            for layer in self.layers:
                if layer is not None:
                    x = layer(x)
            return torch.stack(cols, 1) + x[:, : len(cols)]
"""


def test_item_store_keeps_a_tensor_attribute_and_its_rows_are_tensors():
    # pytorch-tabnet's EmbeddingGenerator (tab_network.py:884-886; found after its blind measure)
    assert lines(ITEM_STORED, "FL107") == [15]
    assert lines(ITEM_STORED, "FL102") == [16]
    torch = pytest.importorskip("torch")
    module = load_snippet(ITEM_STORED)["Embedding"](4, [1])
    assert dynamo_graphs(module, torch.randn(3, 4))[0] != 1


def test_nested_def_argument_rebound_after_the_def_is_not_decided():
    source = NESTED.replace(
        "chosen = list(parts(range(nsrc), nsrc // nmix, nmix))",
        "nmix = targets.sum()\n            chosen = list(parts(range(nsrc), nsrc // nmix, nmix))",
    )
    assert 12 in lines(source, "FL102")
