"""FL101's fix for `torch._check_tensor_all(cond)` (fixtures/breaks/tensor_check.py).

Dynamo (torch 2.13) breaks inside the check (gb0124: it reads the condition with `.item()`);
`torch._assert_async(torch.all(cond))` stays in the graph: one graph, the same outputs, and a
failing condition still raises when compiled."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from source_rules_helpers import (
    dynamo_graphs,
    findings,
    fixed,
    frames_over_inputs,
    load_namespace,
)

from fuselint.findings import Applicability

torch = pytest.importorskip("torch")

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "tensor_check.py"


def test_the_check_breaks_before_the_fix_and_not_after():
    text = FIXTURE.read_text()
    after_text = fixed(text, "FL101")
    assert "        torch._assert_async(torch.all(cond))\n" in after_text
    assert "        torch._check_tensor_all(cond)\n" not in after_text
    torch.manual_seed(0)
    before = load_namespace(text, "before").BoxHead()
    torch.manual_seed(0)
    after = load_namespace(after_text, "after").BoxHead()
    for seed in range(3):
        x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(seed))
        g0, y0, _ = dynamo_graphs(before, x)
        g1, y1, c1 = dynamo_graphs(after, x)
        assert g0 >= 2 and g1 == 1
        assert torch.equal(y0, y1) and torch.equal(y0, c1)
    assert frames_over_inputs(after, [(torch.randn(2, 5, 16),) for _ in range(3)]) == 1


CHECK = """
import torch
from torch import nn

class Check(nn.Module):
    def forward(self, x):
        {line}
        return x * 2
"""


def _check(line: str) -> str:
    return textwrap.dedent(CHECK).replace("{line}", line)


def test_a_failing_condition_still_raises_when_compiled():
    after = load_namespace(fixed(_check("torch._check_tensor_all(x > 0)"), "FL101"), "a").Check()
    torch._dynamo.reset()
    compiled = torch.compile(after, backend="eager", fullgraph=True)
    assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError):
        compiled(torch.tensor([1.0, -1.0, 2.0]))


@pytest.mark.parametrize(
    "line",
    [
        "torch._check_tensor_all(x > 0, lambda: 'positive')",  # a message _assert_async cannot take
        "torch._check_tensor_all_with(ValueError, x > 0, lambda: 'positive')",
    ],
)
def test_forms_the_fix_leaves_alone(line):
    text = _check(line)
    assert [f.code for f in findings(text, "FL101")] == ["FL101"]
    assert fixed(text, "FL101") == text


def test_the_fix_is_unsafe_and_states_its_assumptions():
    (found,) = findings(_check("torch._check_tensor_all(x > 0)"), "FL101")
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert "device-side assert" in found.fix.message and "boolean" in found.fix.message
    assert fixed(_check("torch._check_tensor_all(x > 0)"), "FL101", unsafe=False) == _check(
        "torch._check_tensor_all(x > 0)"
    )
