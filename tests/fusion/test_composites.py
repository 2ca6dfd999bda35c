"""FL230 flags softmax/LayerNorm/RMSNorm written by hand across helpers, and nothing else."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from fusion_capture import aten_graphs, entry_of_module

from fuselint.catalog import load_catalog
from fuselint.fusion.composites import _op, composite_findings, find_composites
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
    assert dict(f.details)["composite"] == "layer_norm"
    assert f.span.line == _line_of(_scale, "return c * torch.rsqrt")
    # mean, sub, mul, mean, add, rsqrt, mul, *w, +b
    assert f.gain.launches == 8


def test_layer_norm_with_var_and_sqrt_is_recognized():
    (f,) = _findings(_spread_layer_norm_var, torch.randn(8, 16))
    assert dict(f.details)["composite"] == "layer_norm"
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


def _graph_nodes(fn, *args) -> list[torch.fx.Node]:
    (fg,) = aten_graphs(fn, *args)
    return [fg.dag.nodes[n]["fx"] for n in fg.dag.nodes]


def test_softmax_over_a_dim_written_positive_matches_the_rules_minus_one():
    def softmax_dim2(x):
        e = torch.exp(x - x.amax(2, keepdim=True))
        return e / e.sum(2, keepdim=True)

    (c,) = find_composites(_graph_nodes(softmax_dim2, torch.randn(2, 4, 8)))
    assert (c.name, c.rule) == ("softmax", "FL201")
    assert [_op(n) for n in c.nodes] == ["amax", "sub", "exp", "sum", "div"]


def test_var_mean_layer_norm_is_the_rules_var_alternative():
    def var_mean_norm(x):
        var, mean = torch.var_mean(x, -1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + 1e-5)

    (c,) = find_composites(_graph_nodes(var_mean_norm, torch.randn(4, 8)))
    assert (c.name, c.rule) == ("layer_norm", "FL212")
    assert [_op(n) for n in c.nodes] == ["var_mean", "getitem", "getitem", "sub", "add", "sqrt", "div"]


def test_rms_norm_takes_its_weight_but_no_bias():
    def rms(x, w, b):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w + b

    (c,) = find_composites(_graph_nodes(rms, torch.randn(4, 8), torch.randn(8), torch.randn(8)))
    assert (c.name, c.rule) == ("rms_norm", "FL214")
    assert [_op(n) for n in c.nodes][-2:] == ["mul", "mul"]  # x * rsqrt, then * w; + b is not rms_norm's


def test_a_lookalike_with_another_constant_is_not_a_composite():
    def not_rms(x):
        return x * torch.rsqrt(x.pow(3).mean(-1, keepdim=True) + 1e-6)

    assert find_composites(_graph_nodes(not_rms, torch.randn(4, 8))) == []


LOGSUMEXP = """
code = "XL221"
name = "graph-logsumexp"
kind = "pattern"
summary = "log of a sum of exps"
message = "use torch.logsumexp"
why = "one kernel"
use_instead = "`torch.logsumexp(x, dim)`"
bad = ["import torch\\ny = torch.log(torch.exp(x).sum(-1))\\n"]
good = ["import torch\\ny = torch.logsumexp(x, -1)\\n"]

[pattern]
match = "torch.log(torch.exp($x).sum($dim))"
replace = "torch.logsumexp($x, $dim)"

[pattern.vars]
dim = "dim"
"""


def test_a_new_graph_composite_is_a_rule_file_and_a_line_in_fl230(tmp_path):
    """Data only: a pattern rule in a folder, named in FL230's `graph_patterns`, is found in traced graphs."""
    from dataclasses import replace

    from fuselint.catalog import Catalog
    from fuselint.fusion.composites import composite_rules

    (tmp_path / "XL221.toml").write_text(LOGSUMEXP)
    catalog = load_catalog((str(tmp_path),))

    def lse(x):
        return torch.log(torch.exp(x).sum(-1))

    nodes = _graph_nodes(lse, torch.randn(4, 8))
    assert find_composites(nodes, composite_rules(catalog)) == []
    fl230 = replace(catalog["FL230"], graph_patterns=(*catalog["FL230"].graph_patterns, "XL221"))
    extended = Catalog({**catalog.rules, "FL230": fl230})
    (c,) = find_composites(nodes, composite_rules(extended))
    assert (c.name, c.rule, c.use_instead) == ("logsumexp", "XL221", "torch.logsumexp(x, dim)")
    assert [_op(n) for n in c.nodes] == ["exp", "sum", "log"]


def test_a_norm_of_a_sum_binds_the_sum_whole():
    """`h = a + b` then `h - h.mean(...)`: the sum is the rule's $x, not operands spliced into the sub."""

    def residual_norm(a, b):
        h = a + b
        c = h - h.mean(-1, keepdim=True)
        return c * torch.rsqrt((c * c).mean(-1, keepdim=True) + 1e-5)

    (c,) = find_composites(_graph_nodes(residual_norm, torch.randn(4, 8), torch.randn(4, 8)))
    assert (c.name, c.rule) == ("layer_norm", "FL212")
    assert "add" not in [n.name for n in c.nodes]  # a + b is the input, not part of the chain
