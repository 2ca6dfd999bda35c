"""A traced model's summary: a frozen value whose JSON is the `plan.models` row of `fuselint graph`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fuselint.fusion.model import analyse, plan_json
from fuselint.fusion.model_summary import ModelSummary, Totals
from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry

TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "trace"


@pytest.fixture(scope="module")
def analysis():
    return analyse(capture(load_entry(f"{TRACE / 'loop_break.py'}:entry")))


def test_summary_is_frozen_and_reads_the_cost(analysis):
    s = analysis.summary()
    assert isinstance(s, ModelSummary) and isinstance(s.eager, Totals)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.graphs = 0
    assert s.model == analysis.capture.entry
    assert s.graphs == len(analysis.plans) >= 2  # loop_break breaks the graph
    assert s.breaks == len(analysis.capture.breaks) >= 1
    assert s.eager.launches == analysis.cost.eager.launches > s.fused.launches
    assert s.fused.time_us == round(analysis.cost.fused.time_us, 3)
    assert s.speedup == round(analysis.cost.speedup, 3)


def test_summary_json_keeps_the_plan_rows_shape(analysis):
    plan = plan_json([analysis, analysis])
    row = plan["models"][0]
    assert list(row) == [
        "model",
        "device",
        "graphs",
        "breaks",
        "eager",
        "fused",
        "speedup",
        "fusible_speedup",
    ]
    assert list(row["eager"]) == ["launches", "bytes", "time_us"]
    assert row == analysis.summary().as_json()
    # The plan's totals add up the rows, side by side.
    assert plan["eager"]["launches"] == 2 * row["eager"]["launches"]
    assert plan["fused"]["bytes"] == 2 * row["fused"]["bytes"]
    json.dumps(plan)  # plain JSON values all the way down
