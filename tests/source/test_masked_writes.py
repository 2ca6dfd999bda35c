"""FL106's fix for a constant written through masked indices (fixtures/breaks/masked_write.py).

Dynamo (torch 2.13) breaks at `x[i[m], j[m]] = c` (the masked indices' length is the data's); the
fix writes through every index with the old value kept where the mask is False: one graph, the same
tensor. The snippets check the forms it must leave alone and the assumption it states.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import dynamo_graphs, findings, fixed, load_namespace

from fuselint.findings import Applicability

torch = pytest.importorskip("torch")

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "masked_write.py"


def _lint(text: str):
    return findings(text, "FL106")


def _fixed(text: str) -> str:
    return fixed(text, "FL106")


def test_masked_write_leaves_one_graph_and_the_same_map_for_every_input():
    text = FIXTURE.read_text()
    fixed = _fixed(text)
    assert "kept = candidate_map[start_point_idxs, end_point_idxs]" in fixed
    assert "start_point_idxs[final_mask]" not in fixed
    before = load_namespace(text, "before").CandidateSuppression()
    after = load_namespace(fixed, "after").CandidateSuppression()
    generator = torch.Generator().manual_seed(0)
    suppressed = set()
    for _ in range(6):
        junctions = torch.rand(8, 2, generator=generator)
        g0, y0, _ = dynamo_graphs(before, junctions)
        g1, y1, c1 = dynamo_graphs(after, junctions)
        assert g0 >= 2  # the masked indices end a graph
        assert g1 == 1
        assert torch.equal(y0, y1) and torch.equal(y0, c1)
        suppressed.add(int((y0 == 0).sum()))
    assert len(suppressed) > 1  # the inputs suppress different numbers of segments


def test_masked_write_recompiles_for_no_new_mask():
    fixed = _fixed(FIXTURE.read_text())
    before = load_namespace(FIXTURE.read_text(), "before").CandidateSuppression()
    after = load_namespace(fixed, "after").CandidateSuppression()
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(after, backend=counter, fullgraph=True)
    generator = torch.Generator().manual_seed(1)
    for _ in range(4):
        junctions = torch.rand(8, 2, generator=generator)
        assert torch.equal(compiled(junctions), before(junctions))
    assert counter.frame_count == 1


WRITE = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, i, j, scores):
        x = x.clone()
        m = scores > 0
{line}
        return x
"""


def _write(line: str) -> str:
    return WRITE.format(line=line)


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("        x[i[m], j[m]] = 0", 0),
        ("        x[i[m]] = -1.5", -1.5),
        ("        x[i[m], j[m]] = True", True),
    ],
)
def test_masked_write_is_the_same_write_for_distinct_positions_of_any_rank(line, value):
    fixed = _fixed(_write(line))
    assert "masked_fill" in fixed
    before, after = load_namespace(_write(line), "a").M(), load_namespace(fixed, "b").M()
    generator = torch.Generator().manual_seed(0)
    for shape in ((6, 6), (6, 6, 3)):  # x of the indices' rank and of one more
        for dtype in (torch.float32, torch.int32, torch.bool):
            x = torch.randn(shape, generator=generator).to(dtype)
            if "j[m]" in line:
                pairs = torch.randperm(36, generator=generator)[:10]  # distinct positions
                i, j = pairs // 6, pairs % 6
            else:
                i, j = torch.randperm(6, generator=generator)[:4], None  # distinct rows
            scores = torch.randn(len(i), generator=generator)
            assert torch.equal(before(x, i, j, scores), after(x, i, j, scores)), (shape, dtype)


def test_masked_write_is_unsafe_and_states_distinct_positions():
    (found,) = [f for f in _lint(_write("        x[i[m], j[m]] = 0")) if f.fix]
    assert found.fix.applicability is Applicability.UNSAFE
    assert "distinct" in found.fix.message
    # the assumption is real: a position named twice, kept once and masked once, may differ
    fixed = _fixed(_write("        x[i[m]] = 7"))
    before, after = load_namespace(_write("        x[i[m]] = 7"), "a").M(), load_namespace(fixed, "b").M()
    x, i = torch.zeros(4), torch.tensor([1, 1, 1, 1])
    scores = torch.tensor([-1.0, 1.0, -1.0, -1.0])
    assert before(x, i, None, scores)[1] == 7
    assert not torch.equal(before(x, i, None, scores), after(x, i, None, scores))


@pytest.mark.parametrize(
    "line",
    [
        "        x[i[m], j[m]] = scores[0]",  # not a literal: it may be a tensor of another shape
        "        x[i[m], j[scores < 0]] = 0",  # two masks
        "        x[i[m], 0] = 0",  # an index that is not masked
        "        x[i[scores > 0]] = 0",  # a mask that is not a name
        "        x[i[m]] += 1",  # reads x[i[m]] first
        "        x[i[m]] = y = 0",  # two targets
        "        x[i[m]] = 0; x = x + 1",  # shares its line
    ],
)
def test_masked_write_leaves_other_forms(line):
    assert all(f.fix is None for f in _lint(_write(line)))


def test_masked_write_takes_a_name_the_function_does_not_use():
    text = _write("        kept = 1\n        x[i[m]] = 0\n        x = x * kept")
    fixed = _fixed(text)
    assert "kept_1 = x[i]" in fixed
    before, after = load_namespace(text, "a").M(), load_namespace(fixed, "b").M()
    x, i, scores = torch.randn(6), torch.tensor([0, 2, 4]), torch.tensor([1.0, -1.0, 1.0])
    assert torch.equal(before(x, i, None, scores), after(x, i, None, scores))
