"""FL150's bad and good examples are traced, not linted: bad ones break, good ones do not."""

from __future__ import annotations

import pytest

from fuselint.catalog import load_catalog
from fuselint.graph.breaks import break_findings
from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry

GRAPH_RULES = [r for r in load_catalog() if r.kind == "graph" and r.code == "FL150"]


def _codes(source: str, tmp_path, name: str) -> set[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return {f.code for f in break_findings(capture(load_entry(f"{path}:entry")))}


@pytest.mark.parametrize(
    "rule,i", [pytest.param(r, i, id=f"{r.code}-bad{i}") for r in GRAPH_RULES for i in range(len(r.bad))]
)
def test_bad_example_breaks(rule, i, tmp_path):
    assert rule.code in _codes(rule.bad[i], tmp_path, f"bad{i}")


@pytest.mark.parametrize(
    "rule,i", [pytest.param(r, i, id=f"{r.code}-good{i}") for r in GRAPH_RULES for i in range(len(r.good))]
)
def test_good_example_does_not_break(rule, i, tmp_path):
    assert rule.code not in _codes(rule.good[i], tmp_path, f"good{i}")
