"""FL102: branches on tensor values are flagged; branches on host values are not."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import findings, fixed, lines

MODULE = """
import random
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, mask=None, use_cache=False):
        {test}
        return x
"""


@pytest.mark.parametrize(
    "test",
    [
        "if x.sum() > 0: x = x * 2",
        "if mask.any(): x = x * 2",
        "if x.norm().max() > self.threshold: x = x * 2",
        "if self.training and torch.rand([]) < self.layerdrop: x = x * 2",
        "if mask is not None and (mask == 0).all(): x = x * 2",
        "if x.sum().item() > 0 or mask.any(): x = x * 2",
        "if torch.equal(x, mask): x = x * 2",
        "if not torch.isfinite(x).all(): x = x * 2",
        "while x.abs().max() > 1: x = x / 2",
        "assert (x >= 0).all(), f'negative values in {mask}'",
        "x = x * 2 if x.mean() > 0 else x",
    ],
)
def test_tests_on_tensor_values_are_flagged(test):
    assert lines(MODULE.format(test=test), "FL102") == [8]


@pytest.mark.parametrize(
    "test",
    [
        "if x.shape[0] > 1: x = x * 2",
        "if x.size(-1) % 2 == 0: x = x * 2",
        "if x.dtype == torch.float16: x = x * 2",
        "if x.device.type == 'cuda': x = x * 2",
        "if mask is None: x = x * 2",
        "if use_cache and self.config.output_hidden_states: x = x * 2",
        "if self.training: x = x * 2",
        "if self.training and random.random() < self.layerdrop: x = x * 2",
        "if isinstance(mask, torch.Tensor) and len(mask) > 2: x = x * 2",
        "if x.dim() == 3 and x.numel() > 0 and x.requires_grad: x = x * 2",
        "if torch.jit.is_scripting() or torch.compiler.is_compiling(): x = x * 2",
        "if not torch.compiler.is_compiling() and x.isnan().any(): x = x * 2",
        # transformers' `is_tracing(t)` is true under dynamo: the tensor test is never evaluated
        "if not is_tracing(mask) and torch.all(mask == 1): x = x * 2",
        "assert x.shape[-1] == 4, 'bad shape'",
        "x = x * 2 if use_cache else x",
    ],
)
def test_tests_on_host_values_are_not_flagged(test):
    assert lines(MODULE.format(test=test), "FL102") == []


@pytest.mark.parametrize(
    "test",
    [
        "if bool(mask.all()): x = x * 2",
        "if x.sum().item() > 0: x = x * 2",
        "if int(x.argmax()) == 3: x = x * 2",
        "if x.tolist()[0]: x = x * 2",
    ],
)
def test_a_test_that_reads_the_tensor_explicitly_is_one_finding(test):
    found = [(f.code, f.span.line) for f in findings(MODULE.format(test=test), "FL1")]
    assert found == [("FL101", 8)]


GUESSED = """
import enum
import torch
from torch import nn

class Mode(enum.Enum):
    FAST = 1

class M(nn.Module):
    def forward(self, x, kv_caches=None, interp=None, hop=None, kind=None):
        {test}
        return x
"""


@pytest.mark.parametrize(
    "test",
    [
        "if not kv_caches: kv_caches = [None for _ in range(4)]",
        "if kv_caches: x = x * 2",
        "if interp == Mode.FAST: x = x * 2",
        "if hop == 1 or hop > 2: x = x * 2",
        "if kind != 'reflect': x = x * 2",
        "if x.sum() != Mode.FAST: x = x * 2",
        "if x.sum() == 'a': x = x * 2",
    ],
)
def test_guessed_parameters_and_enum_string_int_comparisons_are_host_values(test):
    assert lines(GUESSED.format(test=test), "FL102") == []


@pytest.mark.parametrize(
    "test",
    [
        "if x.sum() == 1: x = x * 2",
        "if (x == 1).any(): x = x * 2",
        "if kv_caches == x.sum(): x = x * 2",
        "kv_caches = x.sum()\n        if kv_caches: x = x * 2",
    ],
)
def test_tensors_compared_with_ints_stay_flagged(test):
    assert lines(GUESSED.format(test=test), "FL102") == [12 if "\n" in test else 11]


def test_if_else_picking_a_tensor_becomes_torch_where():
    src = """
import torch as T
from torch import nn

class M(nn.Module):
    def forward(self, x, y):
        if (x > y).all():
            out = x - y
        else:
            out = y - x
        return out
"""
    assert "        out = T.where((x > y).all(), x - y, y - x)\n" in fixed(src, "FL102")


def test_branches_with_module_calls_random_or_non_boolean_tests_are_not_rewritten():
    src = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            out = self.proj(x)
        else:
            out = x
        if x.sum():
            y = x
        else:
            y = -x
        z = torch.rand_like(x) if (x > 0).any() else x
        return out, y, z
"""
    result = findings(src, "FL102")
    assert len(result) == 3 and all(f.fix is None for f in result)


def test_unsafe_where_fix_is_not_applied_without_unsafe_fixes():
    src = MODULE.format(test="x = x * 2 if (x > 0).any() else x")
    assert fixed(src, "FL102", unsafe=False) == textwrap.dedent(src)


def test_where_fix_imports_torch_when_the_file_only_imports_from_it():
    src = """
from torch import nn

class M(nn.Module):
    def forward(self, x):
        return x * 2 if (x > 0).all() else x
"""
    result = fixed(src, "FL102")
    assert "import torch\n" in result and "return torch.where((x > 0).all(), x * 2, x)" in result


@pytest.mark.parametrize(
    "statement", ["assert (x >= 0).all()", "assert torch.isfinite(x).all(), 'non-finite'"]
)
def test_a_plain_assert_is_not_a_break(statement):
    """dynamo (torch 2.13) traces `assert t` and `assert t, "text"` as torch._assert_async(t): one
    graph; only a message formatted at run time makes it leave the graph."""
    source = f"""
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, mask):
        {statement}
        return x
"""
    assert lines(source, "FL102") == []
