"""FL108's finding and fix for a buffer made with `nn.Buffer` and rebound in forward
(fixtures/breaks/buffer_rebind.py).

Dynamo (torch 2.13) breaks where forward rebinds such a buffer (gb4841); registered with
`register_buffer` the same rebinding traces: one graph, the same outputs and state dict. The
snippets check the forms it must leave alone.
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

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "buffer_rebind.py"


def test_buffer_rebind_leaves_one_graph_and_the_same_outputs():
    text = FIXTURE.read_text()
    fixed_text = fixed(text, "FL108")
    assert (
        "self.register_buffer(" in fixed_text
        and "positional_encoding(positions, width).detach()," in fixed_text
    )
    assert "nn.Buffer(" not in fixed_text.split('"""')[2]
    torch.manual_seed(0)
    before = load_namespace(text, "before").PositionTable()
    torch.manual_seed(0)
    after = load_namespace(fixed_text, "after").PositionTable()
    assert before.state_dict().keys() == after.state_dict().keys()
    assert [n for n, _ in before.named_buffers()] == [n for n, _ in after.named_buffers()] == ["pos_encoding"]
    generator = torch.Generator().manual_seed(0)
    for length in (4, 9, 16):
        ids = torch.randint(0, 10, (2, length), generator=generator)
        g0, y0, _ = dynamo_graphs(before, ids)
        g1, y1, c1 = dynamo_graphs(after, ids)
        assert g0 >= 2  # the rebinding ends a graph
        assert g1 == 1
        assert torch.equal(y0, y1) and torch.equal(y0, c1)
    assert torch.equal(before.pos_encoding, after.pos_encoding)


def test_buffer_rebind_recompiles_for_no_new_input():
    after = load_namespace(fixed(FIXTURE.read_text(), "FL108"), "after").PositionTable()
    generator = torch.Generator().manual_seed(1)
    inputs = [(torch.randint(0, 10, (2, 6), generator=generator),) for _ in range(3)]
    assert frames_over_inputs(after, inputs) == 1


MODULE = """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
{forward}
        return x + self.pos
"""


def _module(init: str, forward: str) -> str:
    return MODULE.format(init=textwrap.indent(init, "        "), forward=textwrap.indent(forward, "        "))


REBIND = "self.pos = self.pos.to(dtype=x.dtype)"


def test_buffer_rebind_finding_is_unsafe_and_states_requires_grad():
    text = _module("self.pos = nn.Buffer(torch.zeros(4))", REBIND)
    (found,) = findings(text, "FL108")
    assert found.span.line == text.splitlines().index("        " + REBIND) + 1
    assert found.fix.applicability is Applicability.UNSAFE
    assert "require grad" in found.fix.message
    # the assumption is real: nn.Buffer keeps its data's requires_grad, the registered copy does not
    text = _module("self.pos = nn.Buffer(torch.zeros(4, requires_grad=True))", REBIND)
    before, after = load_namespace(text, "a").M(), load_namespace(fixed(text, "FL108"), "b").M()
    assert before.pos.requires_grad and not after.pos.requires_grad


@pytest.mark.parametrize(
    ("init", "forward"),
    [
        ('self.register_buffer("pos", torch.zeros(4))', REBIND),  # registered: traces
        ("self.pos = torch.zeros(4)", REBIND),  # a plain attribute: traces
        ("self.pos = nn.Buffer(torch.zeros(4))", "y = self.pos.to(dtype=x.dtype)"),  # read, not rebound
        ("self.pos = nn.Parameter(torch.zeros(4))", "x = x * 2"),  # no buffer
        ("self.pos = nn.Buffer(torch.zeros(4))", "self.pos = nn.Buffer(x * 2)"),  # remade: not measured
        ("self.pos = nn.Buffer(torch.zeros(4))", "self.pos = self.pos * 1"),  # arithmetic: traces
        (
            "self.pos = nn.Buffer(torch.zeros(4))",
            "self.pos = self.keep(self.pos)",
        ),  # a helper's value: traces
        ("self.pos = nn.Buffer(torch.zeros(4))", "self.pos = x.to(dtype=x.dtype)"),  # another tensor's cast
    ],
)
def test_buffer_rebind_leaves_other_forms(init, forward):
    assert findings(_module(init, forward), "FL108") == []


@pytest.mark.parametrize(
    "init",
    [
        "self.pos = torch.ones(4)\nself.pos = nn.Buffer(torch.zeros(4))",  # bound before: the name is taken
        "self.pos = nn.Buffer(torch.zeros(4), True)",  # persistence by position: not nn.Buffer's signature
        "self.pos = nn.Buffer(torch.zeros(4))  # table",  # a comment the rewrite would drop
    ],
)
def test_buffer_rebind_finds_but_does_not_rewrite_other_definitions(init):
    (found,) = findings(_module(init, REBIND), "FL108")
    assert found.fix is None
