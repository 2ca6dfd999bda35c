"""What a package builds and compiles itself with `torch.compile(build(...), fullgraph=True)` compiles
whole under the package's own settings (a break there would raise): its findings sit on the
`compiled-whole` road, which `--paths normal` leaves out (kornia 0.9.0's RANSAC program: seed 26 #45,
seed 29 #13 of bench/results/real_breaks_precision.md). The same helper that a forward also calls
directly stays on the normal path, and a compile without `fullgraph=True` marks nothing. On torch 2.13
`fullgraph=True` captures a boolean-mask read (and `.item()`) that breaks the graph without it."""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

from fuselint.source.paths import COMPILED_WHOLE, off_path

SRC = """
import torch

_PROGRAMS = {}


def compact(models):
    return models[torch.isfinite(models).flatten(1).all(1)]


def kept(models):
    return models[models.sum(-1) > 0]


def build_program(scale):
    def program(models):
        return compact(models * scale)

    return program


def build_loose(scale):
    def program(models):
        return kept(models * scale)

    return program


class Estimator(torch.nn.Module):
    def forward(self, models):
        key = 2.0
        if key not in _PROGRAMS:
            with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
                _PROGRAMS[key] = torch.compile(build_program(key), fullgraph=True)
        return _PROGRAMS[key](models)


class Loose(torch.nn.Module):
    def forward(self, models):
        return torch.compile(build_loose(2.0))(models)


class Direct(torch.nn.Module):
    def forward(self, models):
        return kept(models)
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SRC.splitlines(), 1) if text in line)


def test_what_the_package_compiles_whole_sits_on_its_road():
    roads = {f.span.line: off_path(f) for f in findings(SRC, "FL106") if f.code == "FL106"}
    assert roads[_line("return models[torch.isfinite")] == COMPILED_WHOLE


def test_a_helper_also_called_directly_or_compiled_without_fullgraph_stays_normal():
    roads = {f.span.line: off_path(f) for f in findings(SRC, "FL106") if f.code == "FL106"}
    assert roads[_line("return models[models.sum(-1) > 0]")] is None


def test_the_package_compile_runs_whole_and_a_plain_compile_breaks():
    torch = pytest.importorskip("torch")
    namespace = load_snippet(SRC)
    models = torch.randn(4, 9)
    models[1, 0] = float("nan")
    torch._dynamo.reset()
    out = namespace["Estimator"]()(models)  # fullgraph=True would raise on a break
    assert out.shape == (3, 9)
    # compiled without fullgraph (torch 2.13's default settings), the same program breaks (gb0036)
    assert dynamo_break_reasons(namespace["build_program"](2.0), models) != []
