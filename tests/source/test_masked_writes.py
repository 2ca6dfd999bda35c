"""Fixes for constants written through masks.

FL106's fix for a constant written through masked indices (fixtures/breaks/masked_write.py).

Dynamo (torch 2.13) breaks at `x[i[m], j[m]] = c` (the masked indices' length is the data's); the
fix writes through every index with the old value kept where the mask is False: one graph, the same
tensor. The snippets check the forms it must leave alone and the assumption it states.

FL102's fix for stores under a tensor test, `if <test>: t[m] = c` (fixtures/breaks/zero_durations.py,
FastSpeech2's zero-duration guard): the test folds into the mask, a safe rewrite.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import (
    bit_equal,
    confirm_fixture_fix,
    dynamo_break_reasons,
    dynamo_graphs,
    findings,
    fixed,
    load_namespace,
)

from fuselint.findings import Applicability

torch = pytest.importorskip("torch")

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "masked_write.py"
DURATIONS = FIXTURE.with_name("zero_durations.py")


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


# ---------------------------------------------------------------- FL102: `if <test>: t[m] = c`


def test_zero_durations_fixture_breaks_before_and_not_after_with_the_same_durations():
    text = DURATIONS.read_text()
    after = fixed(text, "FL102", unsafe=False)  # a safe fix: written without --unsafe-fixes
    assert "durations[durations.sum(dim=1).eq(0) & (durations.sum() == 0)] = 1" in after
    assert "        if durations.sum() == 0:" not in after
    scales = iter([0.0, 3.0, 0.0, 3.0])  # a zero input predicts no frame for any token

    def make(generator):
        return (torch.randn(2, 5, 8, generator=generator) * next(scales),)

    confirm_fixture_fix(text, after, "DurationPredictor", make)
    model = load_namespace(text, "m").DurationPredictor().eval()
    with torch.no_grad():
        assert torch.equal(model(torch.zeros(2, 5, 8)), torch.ones(2, 5, dtype=torch.long))  # the branch ran


STORE = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, y):
        x = x.clone()
        m = y > 0
{block}
        return x, y
"""


def _store(block: str) -> str:
    return STORE.format(block=block)


def _stores_agree(text: str, fixed_text: str) -> None:
    """Equal outputs on inputs that take and skip the branch, and no break in the fixed form."""
    before, after = load_namespace(text, "a").M(), load_namespace(fixed_text, "b").M()
    generator = torch.Generator().manual_seed(0)
    for shift in (-5.0, 0.0, 5.0, 0.0):  # all-False masks, mixed ones, all-True ones
        x = torch.randn(3, 4, generator=generator)
        y = torch.randn(3, 4, generator=generator) + shift
        assert bit_equal(before(x, y), after(x, y)), shift
    assert dynamo_break_reasons(before, x, y)
    assert dynamo_break_reasons(after, x, y) == []


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("        if x.sum() > 0:\n            x[m] = 0", "        x[m & (x.sum() > 0)] = 0"),
        ("        if 0 < y.max():\n            x[y < 0] = -1.5", "        x[(y < 0) & (0 < y.max())] = -1.5"),
        ("        if torch.all(y > -1):\n            x[m] = True", "        x[m & torch.all(y > -1)] = True"),
        ("        if (y > 9).any():\n            x[m] = 0", "        x[m & (y > 9).any()] = 0"),
    ],
)
def test_store_under_a_test_folds_the_test_into_the_mask(block, expected):
    text = _store(block)
    (found,) = [f for f in findings(text, "FL102") if f.fix]
    assert found.fix.applicability is Applicability.SAFE
    after = fixed(text, "FL102", unsafe=False)
    assert expected in after.splitlines()
    _stores_agree(text, after)


def test_several_stores_read_the_test_once_before_the_first_writes():
    # the second store's mask reads what the first wrote, and the test reads x: as in the `if`, the
    # test is read before any store
    block = "        if x.sum() > 0:\n            x[m] = 0\n            x[x < 0.5] = 2"
    text = _store(block)
    after = fixed(text, "FL102", unsafe=False)
    assert "        taken = x.sum() > 0\n        x[m & taken] = 0\n        x[(x < 0.5) & taken] = 2" in after
    _stores_agree(text, after)


@pytest.mark.parametrize("test", ["m.any()", "torch.any(m)"])
def test_a_guard_that_the_mask_has_a_true_element_is_dropped(test):
    text = _store(f"        if {test}:\n            x[m] = 0\n            x[m] = 1")
    (found,) = [f for f in findings(text, "FL102") if f.fix]
    assert found.fix.applicability is Applicability.SAFE and "writes nothing" in found.fix.message
    after = fixed(text, "FL102", unsafe=False)
    assert "        x[m] = 0\n        x[m] = 1\n        return x, y" in after
    _stores_agree(text, after)


@pytest.mark.parametrize(
    "block",
    [
        "        if x.sum() > 0:\n            x[m] = 0\n        else:\n            x[m] = 1",  # an else
        "        if x.sum() > 0:  # keep\n            x[m] = 0",  # a comment the rewrite would drop
        "        if x.sum() > 0:\n            x[m] = y[0, 0]",  # not a literal
        "        if x.sum() > 0:\n            x[m] += 1",  # reads the stored elements
        "        if x.sum() > 0:\n            x[m] = 0\n            y = y + 1",  # another statement
        "        if x.sum() > 0:\n            x[torch.rand(3, 4) > 0.5] = 0",  # a mask that draws
        "        if x.sum() > 0:\n            x[m.long()] = 0",  # an index, not a mask
        "        if x[:1, 0] > 0:\n            x[m] = 0",  # a one-element test of rank 1
        "        if x.sum(dim=0)[0] > 0:\n            x[m] = 0",  # not a full reduction
        "        if x.sum() > 0:\n            x[m, 0] = 0",  # the mask with another index
    ],
)
def test_store_under_a_test_leaves_other_forms(block):
    text = _store(block)
    fixes = [f.fix for f in findings(text, "FL102") if f.fix]
    assert all("mask" not in fix.message for fix in fixes)


def test_a_one_element_test_of_another_rank_would_change_the_mask():
    # why the fix takes only 0-d tests: `m & t` with t of shape (1, 1) broadcasts m to a new rank
    m, t = torch.tensor([True, False]), torch.tensor([[True]])
    assert (m & t).shape == (1, 2)
    assert (m & torch.tensor(True)).shape == (2,)
