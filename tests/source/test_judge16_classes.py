"""judge16's classes (gpytorch 1.15.2 + linear_operator 0.6.1, held out; see
bench/results/precision_untuned16.md), each checked against dynamo (torch 2.13):

1. `torch.equal(a, b)` (and `allclose`, `is_nonzero`) reads the tensors where it is called: the
   graph breaks on the call's line (gb0033), also when the bool is stored for a later `if`
   (gpytorch's `x1_eq_x2 = torch.equal(x1, x2)`) or computed inside a multi-line `all(...)`.
2. A module that overrides `__call__` runs it when called, so `__call__` is an entry like
   `forward` (gpytorch's `Kernel`, `ExactGP`, `_VariationalStrategy`).
3. `.size()` of an element of a list attribute, or of `self` (a method inherited from another
   file), is a host value: comparing sizes reads no tensor.
4. A comparison method only tensors have (`variance.lt(eps)`, `.isnan()`) on a value of unknown
   kind gives a boolean tensor, so `if variance.lt(eps).any():` breaks (gb0170).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, lines, logged_break_lines

from fuselint.config import Config
from fuselint.source.lint import lint_text

BREAKS = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"
KERNEL = BREAKS / "kernel_call.py"


def _found(path: Path) -> dict[int, str]:
    return {
        f.span.line: f.code for f in lint_text(path.name, path.read_text(), CATALOG, Config(select=("FL1",)))
    }


def test_kernel_flags_each_host_comparison_and_the_call_override():
    # 21: torch.equal stored; 34: .item() in __call__; 36: all(...) over equal; 37: the equal in it.
    # Not 31: sizes compared.
    assert _found(KERNEL) == {21: "FL102", 34: "FL101", 36: "FL102", 37: "FL102"}


def test_dynamo_breaks_where_the_kernel_is_flagged():
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(KERNEL.read_text(), str(KERNEL), "exec"), namespace)  # noqa: S102 - our own fixture
    kernel = namespace["Kernel"]([torch.ones(2), torch.ones(3)])
    x = torch.randn(4, 2)
    assert logged_break_lines(kernel, x, x.clone(), filename=str(KERNEL)) == set(_found(KERNEL))


EQUALS = """
    import torch
    from torch import nn


    class Check(nn.Module):
        def forward(self, x, y):
            close = x.allclose(y)
            same = torch.equal(x, y)
            if torch.compiler.is_compiling() or torch.equal(x, y * 2):
                x = x + 1
            if torch.equal(x, y):
                return x
            return x + close + same
"""


def test_one_finding_per_comparison_and_none_where_compiling_skips_it():
    # 8, 9: stored; 12: the test's own finding; not 10 (is_compiling() short-circuits the `or`)
    assert lines(EQUALS, "FL102") == [8, 9, 12]


def _module(tmp_path: Path, snippet: str, name: str):
    """Class `name` of `snippet` (indented as the tests write it), from a file of its own so that
    dynamo's break log names its lines; and that file's path."""
    source = tmp_path / "snippet.py"
    source.write_text(snippet.replace("\n    ", "\n"))
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # noqa: S102 - our own fixture
    return namespace[name](), str(source)


def test_dynamo_breaks_on_stored_comparisons_and_skips_the_short_circuit(tmp_path):
    torch = pytest.importorskip("torch")
    check, source = _module(tmp_path, EQUALS, "Check")
    x = torch.randn(3)
    assert logged_break_lines(check, x, x.clone(), filename=source) == {8, 9, 12}


SIZES = """
    from torch import nn


    class Operator(nn.Module):
        def matmul(self, other):
            index = -2 if other.ndimension() > 1 else -1
            if self.size(-1) != other.size(index):
                raise RuntimeError("size mismatch")
            return other

        def forward(self, x):
            return self.matmul(x)
"""


def test_sizes_of_self_are_host_values():
    assert lines(SIZES, "FL102") == []


LOOKS_LIKE_TENSOR = """
    from torch import nn


    class Posterior(nn.Module):
        def forward(self, x):
            variance = self.distribution.variance
            if variance.lt(1e-6).any():
                x = x + 1
            if variance.min() > 0:
                x = x + 2
            return x
"""


def test_a_tensor_only_comparison_method_makes_an_unknown_value_a_tensor():
    # `.lt()` exists on tensors, not on numpy arrays or numbers; `.min()` alone proves nothing (9)
    assert lines(LOOKS_LIKE_TENSOR, "FL102") == [8]


def test_dynamo_breaks_on_a_tensor_only_comparison(tmp_path):
    torch = pytest.importorskip("torch")
    model, source = _module(tmp_path, LOOKS_LIKE_TENSOR, "Posterior")
    model.distribution = torch.distributions.Normal(torch.zeros(3), torch.ones(3))
    # both tests read the variance (the second is a miss the test above names)
    assert logged_break_lines(model, torch.randn(3), filename=source) == {8, 10}
