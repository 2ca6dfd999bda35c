"""The false class judge8 found on pyro-ppl 1.9.2 (bench/results/precision_untuned8.md, #p1-#p7): a
`forward` parameter that holds sample-site names (`target_labels`), taken for a tensor on its name
alone. A string tested `in` it, an element compared with a string or used as a dict key, a
`sep.join` of it, or a `None` default filled with a dict's keys shows strings: it is no tensor in
that function nor in the helpers it is handed to. Dynamo (torch 2.13) traces each quiet function
with a list of strings in one graph; the look-alike whose parameter is a tensor stays flagged
and breaks."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import breaks_under_dynamo, lines


def _run(source: str, name: str):
    namespace: dict = {}
    exec(compile(textwrap.dedent(source), "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    return namespace[name]


# pyro's OED guides, cut down: a dict of parameters keyed by site name, read for the labels asked.
LABELS = """
    import torch
    from torch import nn

    class Posterior(nn.Module):
        def __init__(self, sizes, tau_label="tau"):
            super().__init__()
            self.weights = nn.ParameterDict({k: nn.Parameter(torch.ones(n)) for k, n in sizes.items()})
            self.tau_label = tau_label

        def formula(self, y, target_labels):
            return {l: self.weights[l] * y for l in target_labels}

        def get_params(self, y, target_labels):
            kept = [label for label in target_labels if label != self.tau_label]
            return self.formula(y, kept)

        def forward(self, y, target_labels):
            mu = self.get_params(y, target_labels)
            if self.tau_label in target_labels:
                y = y * 2
            out = y
            for label in target_labels:
                if label != self.tau_label:
                    out = out + mu[label].sum()
            return out

    class Laplace(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.means = nn.ParameterDict({k: nn.Parameter(torch.ones(n)) for k, n in sizes.items()})

        def forward(self, y, target_labels=None):
            if target_labels is None:
                target_labels = list(self.means.keys())
            out = y
            for l in target_labels:
                out = out + self.means[l].sum()
            return out

    class Direct(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.weights = nn.ParameterDict({k: nn.Parameter(torch.ones(n)) for k, n in sizes.items()})

        def formula(self, y, target_labels):
            return {l: self.weights[l] * y for l in target_labels}

        def get_params(self, y, target_labels):
            return self.formula(y * 2, target_labels)

        def forward(self, y, target_labels):
            mu = self.get_params(y, target_labels)
            out = y
            for l in target_labels:
                out = out + mu[l].sum()
            return out

    class Plain(nn.Module):
        def forward(self, y, target_labels):
            out = y
            for l in target_labels:
                if l != 0:
                    out = out + l
            return out
"""


def test_string_evidence_clears_the_guess():
    # main flagged 15, 24 (FL102), 37 and 47 (FL107): the element tests, the loop after the fill,
    # and Direct's dict comprehension, handed `target_labels` through get_params. Plain.forward
    # tests each element of what it iterates (63): no string shows, it stays.
    assert lines(LABELS, "FL102") == [63]
    assert lines(LABELS, "FL107") == []


def test_labels_trace_and_a_tensor_breaks():
    torch = pytest.importorskip("torch")
    sizes = {"w": 3, "tau": 1}
    y = torch.randn(3)
    assert not breaks_under_dynamo(_run(LABELS, "Posterior")(sizes), y, ["w", "tau"])
    assert not breaks_under_dynamo(_run(LABELS, "Laplace")(sizes), y)
    assert not breaks_under_dynamo(_run(LABELS, "Direct")(sizes), y, ["w", "tau"])
    assert breaks_under_dynamo(_run(LABELS, "Plain")(), y, torch.tensor([0.0, 1.0]))


def test_a_number_option_is_no_string_evidence():
    # `self.k` is a number option: `x != self.k` on an element of a tensor is a real test.
    source = """
        import torch
        from torch import nn

        class Count(nn.Module):
            def __init__(self, k=0):
                super().__init__()
                self.k = k

            def forward(self, y, values):
                for v in values:
                    if v != self.k:
                        y = y + 1
                return y
    """
    assert lines(source, "FL102") == [12]
