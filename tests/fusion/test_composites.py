"""FL230 flags softmax/LayerNorm/RMSNorm written by hand across helpers, and nothing else."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from fusion_capture import aten_graphs, entry_of_module

from fuselint.catalog import load_catalog
from fuselint.fusion.composites import composite_findings
from fuselint.fusion.model import analyse
from fuselint.fusion.plan import plan
from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry


def _examples(which: str) -> list[str]:
    return list(getattr(load_catalog()["FL230"], which))


def _findings(fn, *args):
    return composite_findings([plan(fg) for fg in aten_graphs(fn, *args)])


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _findings_of_module(source: str, tmp_path: Path, name: str):
    path, fn, args = entry_of_module(source, tmp_path, name)
    return path, _findings(fn, *args)


# Helpers at module level so that the chain's ops come from several functions.
def _shift(x):
    return x - x.amax(-1, keepdim=True)


def _normalize(e):
    return e / e.sum(-1, keepdim=True)


def _spread_softmax(x):
    return _normalize(torch.exp(_shift(x)))


def _center(x):
    return x - x.mean(-1, keepdim=True)


def _scale(c, w, b):
    var = (c * c).mean(-1, keepdim=True)
    return c * torch.rsqrt(var + 1e-5) * w + b


def _spread_layer_norm(x, w, b):
    return _scale(_center(x), w, b)


def _var_of(x):
    return x.var(-1, keepdim=True, unbiased=False)


def _spread_layer_norm_var(x):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(_var_of(x) + 1e-5)


def test_softmax_spread_over_helpers_is_flagged_at_its_final_op():
    (f,) = _findings(_spread_softmax, torch.randn(8, 16))
    assert f.code == "FL230"
    assert f.span.path == __file__
    assert f.span.line == _line_of(_normalize, "return e / e.sum")
    assert f.source_line == "return e / e.sum(-1, keepdim=True)"
    assert "softmax" in f.message and "5 eager kernels" in f.message
    assert f.gain.launches == 4  # amax, sub, exp, sum, div -> one kernel
    assert dict(f.details)["composite"] == "softmax"


def test_library_and_one_function_softmax_are_not_flagged():
    def library(x):
        return F.softmax(x, -1)

    def one_line(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    assert _findings(library, torch.randn(8, 16)) == []
    assert _findings(one_line, torch.randn(8, 16)) == []


def test_layer_norm_spread_over_helpers_is_flagged_with_its_affine_tail():
    (f,) = _findings(_spread_layer_norm, torch.randn(8, 16), torch.randn(16), torch.randn(16))
    assert dict(f.details)["composite"] == "LayerNorm"
    assert f.span.line == _line_of(_scale, "return c * torch.rsqrt")
    # mean, sub, mul, mean, add, rsqrt, mul, *w, +b
    assert f.gain.launches == 8


def test_layer_norm_with_var_and_sqrt_is_recognized():
    (f,) = _findings(_spread_layer_norm_var, torch.randn(8, 16))
    assert dict(f.details)["composite"] == "LayerNorm"
    assert dict(f.details)["nodes"].split(",")[-2:] == ["sqrt", "div"]


def test_library_norms_are_not_flagged():
    def norms(x, w, b):
        return F.layer_norm(x, (16,), w, b, 1e-5) + F.rms_norm(x, (16,), w, 1e-6)

    assert _findings(norms, torch.randn(8, 16), torch.randn(16), torch.randn(16)) == []


def test_analyse_reports_fl230_of_a_captured_entry(tmp_path):
    path = tmp_path / "fl230_entry.py"
    path.write_text(_examples("bad")[0])
    analysis = analyse(capture(load_entry(f"{path}:entry")))
    (f,) = [f for f in analysis.findings if f.code == "FL230"]
    assert f.span.path == str(path) and "final op" in f.source_line


@pytest.mark.parametrize("index", range(len(_examples("bad"))))
def test_bad_examples_are_flagged(index, tmp_path):
    path, findings = _findings_of_module(_examples("bad")[index], tmp_path, f"fl230_bad_{index}")
    assert [f.code for f in findings] == ["FL230"]
    (f,) = findings
    assert f.span.path == str(path)
    assert "final op" in f.source_line  # the examples comment the line of the chain's final op
    assert f.gain.launches >= 4


@pytest.mark.parametrize("index", range(len(_examples("good"))))
def test_good_examples_are_not_flagged(index, tmp_path):
    _path, findings = _findings_of_module(_examples("good")[index], tmp_path, f"fl230_good_{index}")
    assert findings == []
