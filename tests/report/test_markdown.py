"""The Markdown job summary: totals, findings by rule, and models."""

from __future__ import annotations

from fuselint.findings import Finding, Gain, Span
from fuselint.fusion.model_summary import ModelSummary, Totals
from fuselint.report.markdown import render_markdown


def _table(text: str, header_start: str) -> list[list[str]]:
    """The rows of the table whose header begins with `header_start`, as stripped cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_totals_line(findings, catalog):
    text = render_markdown(findings, catalog)
    assert text.startswith("## fuselint\n")
    assert "**4 findings** in 4 files" in text
    assert "1 fixable with `fuselint check --fix`" in text
    assert "1 more with `--unsafe-fixes`" in text
    assert "expected saving if fixed: 3 launches, 1.5 MB, ~12.5 µs on H100 per call" in text


def test_rules_table_sums_gains_per_rule(findings, catalog, project):
    extra = Finding(
        "FL101",
        "again",
        Span("src/model.py", 5, 1, 5, 4),
        gain=Gain(launches=1.5, bytes=600_000, time_us=1.0),
    )
    rows = _table(render_markdown([*findings, extra], catalog), "| Code |")
    by_code = {row[0].split("]")[0].lstrip("["): row for row in rows}
    assert rows[0][0] == "[FL101](https://example.org/rules/FL101)"  # most findings first
    assert by_code["FL101"][1:] == ["host-sync", "2", "0", "3.5", "2.1 MB"]
    assert by_code["FL103"][1:] == ["print-in-forward", "1", "1", "–", "–"]
    assert by_code["FL201"][1:] == ["silu-pattern", "1", "1", "1", "2.05 KB"]
    assert len(rows) == 4


def test_models_table_shows_savings_and_speedup(catalog):
    models = [
        ModelSummary(
            model="resnet|18",
            device="H100",
            graphs=1,
            breaks=0,
            eager=Totals(launches=120, bytes=48_000_000, time_us=2400.0),
            fused=Totals(launches=40, bytes=12_000_000, time_us=800.0),
            speedup=3.0,
            fusible_speedup=3.0,
        ),
        ModelSummary(
            model="tiny",
            device="H100",
            graphs=1,
            breaks=0,
            eager=Totals(launches=3, bytes=900, time_us=7.5),
            fused=Totals(launches=1),
            speedup=1.0,
            fusible_speedup=1.0,
        ),
    ]
    text = render_markdown([], catalog, models)
    assert "No findings" in text
    rows = _table(text, "| Model |")
    assert rows[0] == [
        "resnet\\|18",
        "120 → 40",
        "80",
        "48 MB → 12 MB",
        "36 MB",
        "2.4 ms → 800 µs",
        "3.00×",
    ]
    # A side without bytes or time gets dashes, never a made-up number.
    assert rows[1] == ["tiny", "3 → 1", "2", "–", "–", "–", "–"]


def test_no_models_no_models_table(findings, catalog):
    assert "### Models" not in render_markdown(findings, catalog)
    assert "### Models" not in render_markdown(findings, catalog, [])


def test_cells_never_break_the_table(catalog, project):
    text = render_markdown([Finding("FL101", "x", Span("src/model.py", 1, 1, 1, 2))], catalog)
    for line in text.splitlines():
        if line.startswith("| ["):
            assert line.count(" | ") == 5
