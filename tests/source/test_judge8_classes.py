"""The false class judge7 left on normflows 1.7.3 (bench/results/precision_untuned7.md, #n23-#n39):
a value that is a tensor on one arm of a tensor test only. Tests narrow attribute paths (`self.x`)
as they narrow names, a store to the path ends what the test showed, the later operands of
`not torch.is_tensor(d) and d == 2` see no tensor in `d`, and a tensor test on an attribute that
its class only ever sets to a number option decides nothing but the dead arm. Each flagged line
breaks under dynamo (torch 2.13) and each quiet look-alike traces."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import breaks_under_dynamo, lines


def _run(source: str, name: str):
    namespace: dict = {}
    exec(compile(textwrap.dedent(source), "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    return namespace[name]


# normflows' Lipschitz layers: `self.domain = domain` (domain=2), and a helper whose tensor arm
# squashes a learnable order that no constructor of the package makes any more.
OPTION = """
    import torch
    from torch import nn

    def normalize(v, domain):
        if not torch.is_tensor(domain) and domain == 2:
            return v / v.norm()
        elif domain == 1:
            return v / v.abs().max()
        return v

    class Induced(nn.Module):
        def __init__(self, domain=2, codomain=2.0):
            super().__init__()
            self.domain = domain
            self.codomain = codomain

        def orders(self):
            if torch.is_tensor(self.domain):
                return torch.sigmoid(self.domain) + 1, torch.sigmoid(self.codomain) + 1
            return self.domain, self.codomain

        def forward(self, x):
            domain, codomain = self.orders()
            if not (domain == 2 and codomain == 2):
                x = x * 2
            return normalize(x, domain)

    class Learnable(nn.Module):
        def __init__(self, domain=2, learnable=False):
            super().__init__()
            self.domain = nn.Parameter(torch.tensor(float(domain))) if learnable else domain

        def order(self):
            if torch.is_tensor(self.domain):
                return torch.sigmoid(self.domain) + 1
            return self.domain

        def forward(self, x):
            domain = self.order()
            if domain == 2:
                x = x * 2
            return x
"""


def test_a_tensor_test_on_a_number_option_attribute_leaves_no_tensor():
    # Induced's tests (25, 6, 8) see numbers only; Learnable may store a Parameter: its test is kept.
    assert lines(OPTION, "FL102") == [41]


def test_number_option_attributes_trace_and_a_parameter_breaks():
    torch = pytest.importorskip("torch")
    assert not breaks_under_dynamo(_run(OPTION, "Induced")(), torch.randn(4))
    assert not breaks_under_dynamo(_run(OPTION, "Learnable")(), torch.randn(4))
    assert breaks_under_dynamo(_run(OPTION, "Learnable")(learnable=True), torch.randn(4))


# The operands after a failed tensor test, and an attribute narrowed like a name.
OPERANDS = """
    import torch
    from torch import nn

    class Clip(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bound", torch.ones(()))

        def forward(self, x):
            n = x.sum()
            if not torch.is_tensor(n) and n > 0:
                x = x * 2
            if torch.is_tensor(n) or n > 0:
                x = x + 1
            if not isinstance(self.bound, torch.Tensor) and self.bound > 0:
                x = x * 3
            if torch.is_tensor(self.bound):
                x = x - 1
            else:
                if self.bound > 0:
                    x = x * 5
            if self.bound > 0:
                x = x * 4
            return x
"""


def test_operands_after_a_failed_tensor_test_see_no_tensor():
    # not 12, 14 (a name), 16, 21 (an attribute path); the unguarded test (23) and nothing else
    assert lines(OPERANDS, "FL102") == [23]


def test_operands_after_a_failed_tensor_test_trace():
    torch = pytest.importorskip("torch")
    clip = _run(OPERANDS, "Clip")()

    def guarded(x):
        n = x.sum()
        if not torch.is_tensor(n) and n > 0:
            x = x * 2
        if torch.is_tensor(clip.bound) or clip.bound > 0:
            x = x + 1
        return x

    assert not breaks_under_dynamo(guarded, torch.randn(3))
    assert breaks_under_dynamo(clip, torch.randn(3))  # line 23


# A store to the attribute (`=` or `+=`) ends the narrowing.
STORES = """
    import torch
    from torch import nn

    class Cache(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("last", torch.zeros(()))

        def forward(self, x):
            if not torch.is_tensor(self.last):
                self.last = torch.full((), 2.0)
                if self.last > 0:
                    x = x * 2
            if not torch.is_tensor(self.last):
                self.last += x.mean()
                if self.last > 0:
                    x = x * 3
            return x
"""


def test_a_store_ends_what_a_tensor_test_showed():
    assert lines(STORES, "FL102") == [13, 17]


def test_a_merge_keeps_a_narrowing_only_where_both_arms_show_it():
    source = """
        import torch
        from torch import nn

        class Pick(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("t", torch.ones(()))

            def forward(self, x, flag: bool):
                if flag:
                    if torch.is_tensor(self.t):
                        return x
                    a = self.t > 0
                else:
                    a = x
                if self.t > 0:
                    return x * a
                return x
    """
    # 14 sees the failed test; after the merge (17) the buffer is a tensor again
    assert lines(source, "FL102") == [17]


# ---- entries: the methods torch.distributions calls ----------------------------------------------

# zuko's flows: a `Distribution` whose `log_prob` runs a `Transform`'s methods, both built in the call;
# users compile the loss (`-flow(c).log_prob(x).mean()`), which no `forward` of the package holds.
FLOW = """
    import torch
    from torch.distributions import Distribution, Transform, constraints

    class Exp(Transform):
        domain = constraints.real
        codomain = constraints.positive
        bijective = True

        def _call(self, x):
            return x.exp()

        def _inverse(self, y):
            if (y <= 0).any():
                raise ValueError("y must be positive")
            return y.log()

        def log_abs_det_jacobian(self, x, y):
            return x

    class Shifted(Exp):
        def _call(self, x):
            return x.exp() + sum(x.tolist())

    class Flow(Distribution):
        arg_constraints = {}

        def __init__(self, loc):
            super().__init__(validate_args=False)
            self.loc = loc

        def log_prob(self, x):
            z = Exp()._inverse(x)
            return -((z - self.loc) ** 2).sum()

        def describe(self, x):
            return x.item()

    class Plain:
        def log_prob(self, x):
            return x.item()
"""


def test_distribution_and_transform_methods_are_entries():
    # `_inverse`'s test (14), a subclass's override (23); not `describe` (37), nor a plain class's log_prob (41)
    assert lines(FLOW, "FL102") == [14]
    assert lines(FLOW, "FL101") == [23]


def test_distribution_entries_break_under_dynamo():
    torch = pytest.importorskip("torch")
    flow = _run(FLOW, "Flow")(torch.zeros(()))
    assert breaks_under_dynamo(flow.log_prob, torch.rand(3) + 0.5)
    assert breaks_under_dynamo(_run(FLOW, "Shifted")(), torch.randn(3))
