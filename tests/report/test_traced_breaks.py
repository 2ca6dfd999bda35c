"""Traced graph breaks in every format: dynamo's reason, its gb id and page, the user's stack."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fuselint.findings import Finding, Gain, Span
from fuselint.report.github import render_github
from fuselint.report.markdown import render_markdown
from fuselint.report.sarif import sarif_log
from fuselint.report.text import render_text

URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html"
STACK = "src/model.py:9 in forward\nsrc/layers.py:4 in forward"
DYNAMO = (
    ("gb_id", "gb0170"),
    ("reason", "Data-dependent branching"),
    ("explanation", "Detected data-dependent branching."),
    ("url", URL),
    ("stack", STACK),
)


@pytest.fixture
def merged() -> Finding:
    """A static FL102 that a traced break on its line was merged into (graph/breaks.merge_findings)."""
    return Finding(
        code="FL102",
        message="`if` on tensor values forces a host sync",
        span=Span("src/layers.py", 4, 5, 4, 20),
        gain=Gain(launches=1, bytes=512),
        details=DYNAMO,
    )


@pytest.fixture
def traced() -> Finding:
    """A traced break with no static finding on its line."""
    return Finding(
        code="FL150",
        message="graph break (gb0170): Data-dependent branching",
        span=Span("src/layers.py", 4, 5, 4, 20),
        details=(*DYNAMO, ("hits", "4"), ("dynamo_location", "/usr/lib/python3.11/copy.py:153")),
    )


def test_text_says_dynamo_confirmed_a_merged_static_finding(merged):
    lines = render_text([merged]).splitlines()
    assert lines[0].startswith("src/layers.py:4:5: FL102 ")
    assert lines[1:7] == [
        "  = note: confirmed by dynamo (gb0170): Data-dependent branching",
        "  = note: Detected data-dependent branching.",
        "  = note: user stack, outermost first:",
        "          src/model.py:9 in forward",
        "          src/layers.py:4 in forward",
        f"  = help: see {URL}",
    ]


def test_text_shows_the_stack_and_page_of_a_traced_break_without_repeating_its_reason(traced):
    text = render_text([traced])
    assert "confirmed by dynamo" not in text
    assert text.count("Data-dependent branching") == 1  # in the message only
    assert "  = note: dynamo broke at /usr/lib/python3.11/copy.py:153; dynamo hit it 4 times" in text
    assert text.index("src/model.py:9 in forward") < text.index("src/layers.py:4 in forward")
    assert f"  = help: see {URL}" in text


def test_text_notes_follow_the_source_excerpt(merged, project):
    lines = render_text([merged], {"src/layers.py": ["", "", "", "    if x.sum() > 0:"]}).splitlines()
    assert lines[1] == "   4 |     if x.sum() > 0:"
    assert lines[3] == "  = note: confirmed by dynamo (gb0170): Data-dependent branching"


def test_text_of_a_finding_without_dynamo_facts_is_unchanged():
    plain = Finding("FL103", "print() in forward", Span("a.py", 2, 5, 2, 13))
    assert render_text([plain]) == "a.py:2:5: FL103 print() in forward\nFound 1 error.\n"


def test_github_annotation_carries_the_confirmation_stack_and_page(merged, catalog):
    line = render_github([merged], catalog)
    assert "confirmed by dynamo (gb0170): Data-dependent branching" in line
    assert "src/model.py:9 in forward%0A" in line and URL.replace(":", ":") in line
    assert line.count("\n") == 1  # still one workflow command


def test_sarif_result_carries_the_user_stack_innermost_first(merged, catalog, project):
    (result,) = sarif_log([merged], catalog, Path.cwd())["runs"][0]["results"]
    assert "confirmed by dynamo (gb0170)" in result["message"]["text"]
    (stack,) = result["stacks"]
    frames = [
        (
            f["location"]["physicalLocation"]["artifactLocation"]["uri"],
            f["location"]["physicalLocation"]["region"]["startLine"],
        )
        for f in stack["frames"]
    ]
    assert frames == [("src/layers.py", 4), ("src/model.py", 9)]
    assert result["properties"]["details"]["url"] == URL
    json.dumps(result)


def test_markdown_lists_the_breaks_dynamo_confirmed(merged, traced, catalog):
    md = render_markdown([merged, traced], catalog)
    assert "### Graph breaks seen by dynamo" in md
    assert f"[gb0170]({URL})" in md
    assert "src/layers.py:4" in md and "Data-dependent branching" in md


def test_text_prints_dynamo_hints_before_the_page(merged):
    hinted = dataclasses.replace(
        merged, details=(*merged.details, ("hints", "Use torch.cond.\nMove it out."))
    )
    lines = render_text([hinted]).splitlines()
    first = lines.index("  = help: Use torch.cond.")
    assert lines[first : first + 3] == [
        "  = help: Use torch.cond.",
        "  = help: Move it out.",
        f"  = help: see {URL}",
    ]
