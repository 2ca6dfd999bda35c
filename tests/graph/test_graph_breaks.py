"""FL150 findings from traced breaks, and their merge with static FL1xx findings."""

from __future__ import annotations

import dataclasses

from fuselint.findings import Finding, Span
from fuselint.graph.breaks import break_findings, merge_findings


def test_break_becomes_fl150_at_user_line(captured, line_of):
    (finding,) = break_findings(captured("item_branch.py"))
    details = dict(finding.details)
    assert finding.code == "FL150"
    assert finding.span.line == line_of("item_branch.py", "peak = h.abs().max().item()")
    assert finding.span.path.endswith("fixtures/trace/item_branch.py")
    assert "gb0124" in finding.message and "Tensor.item()" in finding.message
    assert details["gb_id"] == "gb0124"
    assert details["reason"].startswith("Unsupported Tensor.item()")
    assert details["url"].endswith("gb0124.html")
    assert "explored" not in details
    # The span covers the statement's text, starting at its first character.
    assert finding.source_line == "peak = h.abs().max().item()"
    assert finding.span.column == 9


def test_meta_finding_says_one_branch(captured):
    (finding,) = break_findings(captured("data_dependent_if.py", device="meta"))
    assert dict(finding.details)["explored"] == "one branch"
    assert "one branch" in finding.message


def test_deepcopy_finding_keeps_dynamo_location(captured, line_of):
    (finding,) = break_findings(captured("deepcopy_forward.py"))
    assert finding.span.line == line_of("deepcopy_forward.py", "copy.deepcopy(")
    assert dict(finding.details)["dynamo_location"].split(":")[0].endswith("copy.py")


def test_skipped_frame_is_said(captured):
    (finding,) = break_findings(captured("loop_break.py"))
    assert "falls back to eager" in finding.message


def _static(path: str, line: int, code: str = "FL101") -> Finding:
    return Finding(
        code=code,
        message="host sync",
        span=Span(path, line, 9, line, 36),
        details=(("pattern", ".item()"),),
    )


def test_merge_enriches_static_finding_on_same_line(captured):
    traced = break_findings(captured("item_branch.py"))
    static = [_static(traced[0].span.path, traced[0].span.line)]
    merged = merge_findings(static, traced)
    assert len(merged) == 1
    (only,) = merged
    assert only.code == "FL101"
    details = dict(only.details)
    assert details["pattern"] == ".item()"  # its own details come first and stay
    assert details["gb_id"] == "gb0124"
    assert only == dataclasses.replace(static[0], details=only.details)


def test_merge_matches_relative_and_absolute_paths(captured, trace_fixtures):
    traced = break_findings(captured("item_branch.py"))
    absolute = str(trace_fixtures / "item_branch.py")
    merged = merge_findings([_static(absolute, traced[0].span.line)], traced)
    assert [f.code for f in merged] == ["FL101"]


def test_merge_keeps_traced_break_without_static_match(captured):
    traced = break_findings(captured("item_branch.py"))
    other_line = _static(traced[0].span.path, traced[0].span.line + 1)
    not_fl1 = _static(traced[0].span.path, traced[0].span.line, code="FL201")
    merged = merge_findings([other_line, not_fl1], traced)
    assert sorted(f.code for f in merged) == ["FL101", "FL150", "FL201"]
    assert all("gb_id" not in dict(f.details) for f in merged if f.code != "FL150")
