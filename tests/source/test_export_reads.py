"""A host read written for `torch.export` (bounded with `torch._check`, directly or through a method
of the class, or the predicate of `torch.cond`) sits on the export road, which `--paths normal` leaves
out; the same read unbounded, or bounded only by a tensor check, stays on the normal path (torchtune
0.6.1's `_export` position embeddings and export attention, prec30). Under `torch.compile` the read
still breaks; `torch.export` captures the bounded `torch.cond` predicate."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

from fuselint.source.paths import EXPORT, off_path

SRC = """
import torch


class Tiles(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(4, 4, 8))

    def forward(self, x, aspect_ratio):
        for h, w in aspect_ratio:
            h = h.item()
            w = w.item()
            torch._check_is_size(h)
            torch._check(w <= 4)
            x = x + self.table[:h, :w].sum()
        return x


class Resize(torch.nn.Module):
    def check_bounds_for_export(self, sizes):
        for size in sizes:
            torch._check(size >= 1)

    def forward(self, x, target):
        th, tw = target.tolist()
        self.check_bounds_for_export([th, tw])
        return x[:th, :tw]


class Pick(torch.nn.Module):
    def forward(self, x):
        return torch.cond(torch.isnan(x).all().item(), lambda t: t * 0, lambda t: t + 1, (x,))


class Plain(torch.nn.Module):
    def forward(self, x, count):
        n = count.item()
        m = count.sum().item()
        torch._check_tensor_all(count > 0)
        return x[:n] * m
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SRC.splitlines(), 1) if text in line)


def _roads() -> dict[int, str | None]:
    return {f.span.line: off_path(f) for f in findings(SRC, "FL101") if f.code == "FL101"}


def test_reads_bounded_for_export_sit_on_the_export_road():
    roads = _roads()
    assert roads[_line("h = h.item()")] == EXPORT  # `torch._check_is_size(h)`
    assert roads[_line("w = w.item()")] == EXPORT  # `torch._check(w <= 4)`
    assert roads[_line("target.tolist()")] == EXPORT  # through a method of the class that calls torch._check
    assert roads[_line("torch.cond(")] == EXPORT  # the predicate of torch.cond


def test_unbounded_reads_and_tensor_checks_stay_on_the_normal_path():
    roads = _roads()
    assert roads[_line("n = count.item()")] is None
    assert roads[_line("m = count.sum().item()")] is None  # `torch._check_tensor_all` bounds no number


def test_the_export_road_is_named_in_the_message():
    messages = {f.span.line: f.message for f in findings(SRC, "FL101") if f.code == "FL101"}
    assert "written for `torch.export`" in messages[_line("h = h.item()")]
    assert "torch.export" not in messages[_line("n = count.item()")]


def test_compile_breaks_at_the_bounded_read_and_export_captures_the_predicate():
    torch = pytest.importorskip("torch")
    namespace = load_snippet(SRC)
    assert dynamo_break_reasons(namespace["Tiles"](), torch.zeros(2), torch.tensor([[2, 3]])) != []
    pick, x = namespace["Pick"](), torch.randn(2, 3)
    assert dynamo_break_reasons(pick, x) != []
    program = torch.export.export(pick, (x,))
    assert torch.equal(program.module()(x), x + 1)
