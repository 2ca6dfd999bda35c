"""FL101's fix for an assert on `.item()` (fixtures/breaks/item_assert.py).

Dynamo (torch 2.13) breaks at `assert lengths.max().item() <= slen` (gb0124); without `.item()` the
assert tests the tensor, which eager Python reads as it read the number and dynamo turns into
`torch._assert_async`: one graph, the same outputs, the same AssertionError in eager. The snippets
check the forms it must leave alone and the assumptions it states.
"""

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

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "item_assert.py"


def _fixed(text: str) -> str:
    return fixed(text, "FL101")


def _ids(generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 4, (3, 10), generator=generator)  # id 0 pads: rows of several lengths


def test_item_assert_leaves_one_graph_and_the_same_outputs():
    text = FIXTURE.read_text()
    fixed = _fixed(text)
    assert "assert lengths.max() <= slen\n" in fixed
    torch.manual_seed(0)
    before = load_namespace(text, "before").PaddingMask()
    torch.manual_seed(0)
    after = load_namespace(fixed, "after").PaddingMask()
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        ids = _ids(generator)
        g0, y0, _ = dynamo_graphs(before, ids)
        g1, y1, c1 = dynamo_graphs(after, ids)
        assert g0 >= 2  # `.item()` ends a graph
        assert g1 == 1
        assert torch.equal(y0, y1) and torch.equal(y0, c1)


def test_item_assert_recompiles_for_no_new_input():
    fixed = _fixed(FIXTURE.read_text())
    after = load_namespace(fixed, "after").PaddingMask()
    generator = torch.Generator().manual_seed(1)
    assert frames_over_inputs(after, [(_ids(generator),) for _ in range(4)]) == 1
    after.pad_index = -1  # every id counts: lengths == slen, the assert holds at its bound
    assert frames_over_inputs(after, [(_ids(generator),)]) == 1


CHECK = """
import torch
from torch import nn

class Check(nn.Module):
    def forward(self, x, n):
{line}
        return x * 2
"""


def _check(line: str) -> str:
    return CHECK.format(line=textwrap.indent(line, "    "))


@pytest.mark.parametrize(
    ("line", "passing", "failing"),
    [
        ("    assert x.max().item() <= n", (torch.tensor([1, 2]), 2), (torch.tensor([1, 3]), 2)),
        ('    assert n > x.sum().item(), "too many"', (torch.tensor([1.0]), 2), (torch.tensor([2.0]), 2)),
        ("    assert x.min().item() != n", (torch.tensor([1, 2]), 0), (torch.tensor([0, 2]), 0)),
        (
            '    assert torch.all(x >= n).item(), "negative"',
            (torch.tensor([1, 2]), 0),
            (torch.tensor([-1]), 0),
        ),
        (
            "    assert (x.max() - x.min()).item() < n  # spread",
            (torch.tensor([1, 2]), 2),
            (torch.tensor([0, 5]), 2),
        ),
    ],
)
def test_item_assert_passes_and_fails_where_the_assert_did(line, passing, failing):
    fixed = _fixed(_check(line))
    assert ".item()" not in fixed
    before, after = load_namespace(_check(line), "a").Check(), load_namespace(fixed, "b").Check()
    assert torch.equal(before(*passing), after(*passing))
    for module in (before, after):  # eager: the same AssertionError
        with pytest.raises(AssertionError):
            module(*failing)
    g, y, c = dynamo_graphs(after, *passing)
    assert g == 1 and torch.equal(y, c)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError):  # compiled: torch._assert_async's error
        torch.compile(after, backend="eager", fullgraph=True)(*failing)


def test_item_assert_is_unsafe_and_states_its_assumptions():
    (found,) = [f for f in findings(_check("    assert x.max().item() <= n"), "FL101") if f.fix]
    assert found.fix.applicability is Applicability.UNSAFE
    assert "RuntimeError" in found.fix.message and "dtype" in found.fix.message
    # the dtype assumption is real: float32's 0.1 is above the float64 0.1 that `.item()` compared
    line = "    assert x.item() <= n"
    before, after = (
        load_namespace(_check(line), "a").Check(),
        load_namespace(_fixed(_check(line)), "b").Check(),
    )
    x = torch.tensor(0.1)
    with pytest.raises(AssertionError):
        before(x, 0.1)
    assert torch.equal(after(x, 0.1), x * 2)


@pytest.mark.parametrize(
    "line",
    [
        "    assert 0 <= x.max().item() < n",  # a chain: its `and` reads a tensor's truth outside the assert
        "    assert x.max().item() <= n and n > 0",  # not a single comparison
        "    assert x.max().item() <= x.min().item() + n",  # two `.item()` calls
        "    assert x.max().item() + 1 <= n",  # `.item()` is not a side of the comparison
        "    assert x.max().item()",  # not known to be boolean
        "    assert x.max().item() <= n, f'{n}'",  # a message that is not a string literal
        "    ok = x.max().item() <= n",  # not an assert
        "    assert x.max().item() in (1, 2)",  # not an order or equality comparison
    ],
)
def test_item_assert_leaves_other_forms(line):
    assert ".item()" in _fixed(_check(line))
