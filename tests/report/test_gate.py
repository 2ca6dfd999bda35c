"""The CI gate: baselines that survive edits, their file format and errors, thresholds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Finding, Gain, Span
from fuselint.report.gate import (
    Baseline,
    BaselineError,
    Thresholds,
    gate,
    load_baseline,
    new_findings,
    write_baseline,
)
from fuselint.source.lint import lint_text

CATALOG = load_catalog()

MODEL = """\
import torch
from torch import nn

class Block(nn.Module):
    def forward(self, x):
        print("input", x.shape)
        return torch.relu(x)
"""


def _lint(root: Path, rel: str, text: str) -> list[Finding]:
    """Write the file and lint it for real (FL103 flags the prints)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return lint_text(rel, text, CATALOG, Config(root=root))


def _baseline_of(root: Path, findings: list[Finding]) -> Baseline:
    write_baseline(root / "fuselint-baseline.json", findings, root)
    return load_baseline(root / "fuselint-baseline.json")


def test_baseline_hides_what_it_recorded(project):
    found = _lint(project, "pkg/model.py", MODEL)
    assert [f.code for f in found] == ["FL103"]
    assert new_findings(found, _baseline_of(project, found), project) == []


def test_baseline_survives_lines_inserted_above(project):
    baseline = _baseline_of(project, _lint(project, "pkg/model.py", MODEL))
    edited = "# a header comment\n\n" + MODEL.replace(
        "class Block", "def helper():\n    return 1\n\n\nclass Block"
    )
    found = _lint(project, "pkg/model.py", edited)
    assert found[0].span.line == 12  # it moved
    assert new_findings(found, baseline, project) == []


def test_baseline_survives_reindentation(project):
    baseline = _baseline_of(project, _lint(project, "pkg/model.py", MODEL))
    found = _lint(
        project, "pkg/model.py", MODEL.replace('print("input", x.shape)', 'print("input",   x.shape)')
    )
    assert new_findings(found, baseline, project) == []


def test_a_new_finding_is_new(project):
    baseline = _baseline_of(project, _lint(project, "pkg/model.py", MODEL))
    found = _lint(
        project, "pkg/model.py", MODEL.replace("        return", '        print("out")\n        return')
    )
    fresh = new_findings(found, baseline, project)
    assert [(f.code, f.source_line) for f in fresh] == [("FL103", 'print("out")')]


def test_same_line_in_another_file_is_new(project):
    baseline = _baseline_of(project, _lint(project, "pkg/model.py", MODEL))
    other = _lint(project, "pkg/other.py", MODEL)
    assert new_findings(other, baseline, project) == other


def test_duplicate_identical_lines_are_counted(project):
    twice = MODEL.replace('        print("input", x.shape)\n', '        print("input", x.shape)\n' * 2)
    baseline = _baseline_of(project, _lint(project, "pkg/model.py", twice))
    assert len(baseline) == 2
    thrice = MODEL.replace('        print("input", x.shape)\n', '        print("input", x.shape)\n' * 3)
    found = _lint(project, "pkg/model.py", thrice)
    fresh = new_findings(found, baseline, project)
    assert len(fresh) == 1 and fresh[0].span.line == 8  # the third in file order
    once = _lint(project, "pkg/model.py", MODEL)
    assert new_findings(once, baseline, project) == []


def test_order_of_findings_does_not_change_occurrences(project):
    twice = MODEL.replace('        print("input", x.shape)\n', '        print("input", x.shape)\n' * 2)
    found = _lint(project, "pkg/model.py", twice)
    write_baseline(project / "a.json", found, project)
    write_baseline(project / "b.json", found[::-1], project)
    assert (project / "a.json").read_bytes() == (project / "b.json").read_bytes()


def test_line_text_is_read_from_the_file_when_the_rule_left_it_out(findings, project):
    flow = findings[3]
    assert flow.source_line == ""
    baseline = _baseline_of(project, [flow])
    data = json.loads((project / "fuselint-baseline.json").read_text(encoding="utf-8"))
    assert data["findings"][0]["source"] == "if ("
    moved = replace(flow, span=replace(flow.span, line=9, end_line=11))
    path = project / "src" / "flow.py"
    path.write_text("\n" * 5 + path.read_text(encoding="utf-8"), encoding="utf-8")
    assert new_findings([moved], baseline, project) == []


def test_paths_match_whatever_the_working_directory(findings, project, monkeypatch):
    baseline = _baseline_of(project, findings)
    absolute = [replace(f, span=replace(f.span, path=str(project / f.span.path))) for f in findings]
    monkeypatch.chdir(project / "src")
    assert new_findings(absolute, baseline, project) == []


def test_baseline_file_is_sorted_versioned_and_line_free(findings, project):
    write_baseline(project / "base.json", findings, project)
    text = (project / "base.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["version"] == 1 and data["tool"] == "fuselint"
    keys = [(e["path"], e["code"], e["source"], e["occurrence"]) for e in data["findings"]]
    assert keys == sorted(keys) and len(keys) == len(findings)
    assert set(data["findings"][0]) == {"path", "code", "source", "occurrence"}
    assert "ünï/模型.py" in text  # readable in a diff, not \u-escaped
    assert text.endswith("}\n")
    assert not list(project.glob(".base.json.*.tmp"))


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot read baseline"),
        ("{not json", "not valid JSON"),
        ("[]", "must be an object with a `findings` list"),
        ('{"version": 7, "findings": []}', "version 7 is not supported"),
        ('{"version": 1, "findings": [3]}', "findings[0] must be an object"),
        (
            '{"version": 1, "findings": [{"path": "a.py", "code": "FL101", "source": "x", "occurrence": true}]}',
            "findings[0].occurrence must be an integer",
        ),
        (
            '{"version": 1, "findings": [{"path": "a.py", "code": "FL101", "source": "x", "occurrence": 0}]}',
            "occurrence must be at least 1",
        ),
        (
            '{"version": 1, "findings": [{"path": "a.py", "code": "FL101"}]}',
            "findings[0].source must be a string",
        ),
    ],
)
def test_bad_baselines_raise_one_line_errors(tmp_path, content, fragment):
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    message = str(info.value)
    assert fragment in message and "\n" not in message and str(path) in message


def test_unwritable_baseline_raises(findings, project):
    with pytest.raises(BaselineError, match="cannot write baseline"):
        write_baseline(project / "no-such-dir" / "base.json", findings, project)


def _gain(launches=0.0, bytes=0.0, time_us=None) -> Finding:
    return Finding("FL301", "m", Span("a.py", 1, 1, 1, 2), gain=Gain(launches, bytes, time_us, "H100"))


def test_gate_without_thresholds_fails_on_any_new_finding():
    assert gate([]).exit_code == 0
    verdict = gate([Finding("FL103", "m", Span("a.py", 1, 1, 1, 2))])
    assert verdict == type(verdict)(1, "1 new finding")


def test_launch_threshold():
    new = [_gain(launches=6), _gain(launches=4)]
    failed = gate(new, Thresholds(launches=10))
    assert failed.exit_code == 1 and "10 launches >= --fail-on-gain-launches 10" in failed.reason
    passed = gate(new, Thresholds(launches=11))
    assert passed.exit_code == 0 and "below every --fail-on-gain threshold" in passed.reason


def test_time_and_bytes_thresholds_any_reached_fails():
    new = [_gain(bytes=3e6, time_us=40.0), _gain(time_us=15.0)]
    assert gate(new, Thresholds(time_us=50)).exit_code == 1
    assert gate(new, Thresholds(time_us=60)).exit_code == 0
    assert gate(new, Thresholds(bytes=2e6)).exit_code == 1
    verdict = gate(new, Thresholds(bytes=4e6, time_us=55))
    assert verdict.exit_code == 1 and "55 µs >= --fail-on-gain-us 55 µs" in verdict.reason


def test_findings_without_gain_count_as_zero_toward_thresholds():
    verdict = gate([Finding("FL103", "m", Span("a.py", 1, 1, 1, 2))], Thresholds(launches=1))
    assert verdict.exit_code == 0 and "none estimated" in verdict.reason
    assert gate([_gain(launches=2)], Thresholds(time_us=1.0)).exit_code == 0
