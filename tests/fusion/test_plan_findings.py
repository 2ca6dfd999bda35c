"""FL301 fires on the plan's materialized multi-consumer values, at the user's line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fusion_capture import aten_graphs, entry_of_module

from fuselint.catalog import load_catalog
from fuselint.fusion.devices import H200
from fuselint.fusion.plan import plan
from fuselint.fusion.plan_findings import materialized_findings


def _examples(code: str, which: str) -> list[str]:
    return list(getattr(load_catalog()[code], which))


def _findings_of_module(source: str, tmp_path: Path, name: str):
    path, fn, args = entry_of_module(source, tmp_path, name)
    plans = [plan(fg) for fg in aten_graphs(fn, *args)]
    return path, materialized_findings(plans, H200)


@pytest.mark.parametrize("index", range(len(_examples("FL301", "bad"))))
def test_bad_examples_are_flagged(index, tmp_path):
    path, findings = _findings_of_module(_examples("FL301", "bad")[index], tmp_path, f"fl301_bad_{index}")
    assert [f.code for f in findings] == ["FL301"]
    (f,) = findings
    assert f.span.path == str(path)
    assert "#" in f.source_line  # the examples comment the line that computes the value
    assert f.gain.bytes > 0 and f.gain.time_us > 0 and f.gain.device == "H200"


@pytest.mark.parametrize("index", range(len(_examples("FL301", "good"))))
def test_good_examples_are_not_flagged(index, tmp_path):
    _path, findings = _findings_of_module(_examples("FL301", "good")[index], tmp_path, f"fl301_good_{index}")
    assert findings == []


def test_gain_counts_the_write_and_each_other_kernels_read(tmp_path):
    source = _examples("FL301", "bad")[0]
    _path, (f,) = _findings_of_module(source, tmp_path, "fl301_gain")
    value = 64 * 32 * 4  # probs, fp32
    assert f.gain.bytes == 2 * value  # written by the softmax kernel, read by the sum(0) kernel
    assert f.gain.time_us == pytest.approx(2 * value / (H200.bandwidth_gbs * 1e3))
    assert dict(f.details)["node"] == "div"


def test_gain_is_weighted_by_graph_calls():
    def fn(x):
        s = torch.softmax(x, -1)
        return s.sum(0), s * 2

    (fg,) = aten_graphs(fn, torch.randn(8, 16))
    once = materialized_findings([plan(fg)])
    fg.calls = 4
    four = materialized_findings([plan(fg)])
    assert four[0].gain.bytes == 4 * once[0].gain.bytes
