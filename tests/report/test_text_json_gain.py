"""Gains in the text and JSON reports, and the units every format shares."""

from __future__ import annotations

import json

import pytest

from fuselint.findings import Finding, Gain, Span
from fuselint.report.gain import describe_gain, format_bytes, format_count, format_time_us, total_gain
from fuselint.report.json_format import render_json
from fuselint.report.text import render_text, summary


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1500, "1.5 KB"),
        (2048, "2.05 KB"),
        (1_500_000, "1.5 MB"),
        (48e6, "48 MB"),
        (123_456_789, "123 MB"),
        (1.1e9, "1.1 GB"),
    ],
)
def test_format_bytes(value, text):
    assert format_bytes(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.4, "0.4 µs"),
        (12.5, "12.5 µs"),
        (999, "999 µs"),
        (1250, "1.25 ms"),
        (800_000, "800 ms"),
        (2.1e6, "2.1 s"),
    ],
)
def test_format_time_us(value, text):
    assert format_time_us(value) == text


def test_format_count():
    assert [format_count(v) for v in (3, 3.0, 2.5, 1200)] == ["3", "3", "2.5", "1,200"]


def test_describe_gain_leaves_out_what_is_zero_or_unknown():
    assert describe_gain(None) == ""
    assert describe_gain(Gain()) == ""
    assert describe_gain(Gain(launches=1)) == "1 launch"
    assert describe_gain(Gain(bytes=4096, time_us=3.0)) == "4.1 KB, ~3 µs"
    assert describe_gain(Gain(2, 1e6, 7.25, "H200")) == "2 launches, 1 MB, ~7.25 µs on H200"


def test_total_gain_keeps_the_device_of_the_timed_gains():
    spans = Span("a.py", 1, 1, 1, 2)
    found = [
        Finding("FL301", "m", spans, gain=Gain(1, 100, 5.0, "H100")),
        Finding("FL301", "m", spans, gain=Gain(2, 200)),
        Finding("FL103", "m", spans),
    ]
    assert total_gain(found) == Gain(3, 300, 5.0, "H100")
    assert total_gain(found[2:]) is None
    mixed = [*found, Finding("FL301", "m", spans, gain=Gain(0, 0, 1.0, "A100"))]
    assert total_gain(mixed) == Gain(3, 300, 6.0, None)


def test_text_line_ends_with_the_expected_saving(findings):
    text = render_text(findings)
    first = text.splitlines()[0]
    assert first == (
        "src/model.py:4:9: FL101 `.item()` copies to the host and ends the graph"
        " (expected saving: 2 launches, 1.5 MB, ~12.5 µs on H100)"
    )
    assert "Expected saving if all are fixed: 3 launches, 1.5 MB, ~12.5 µs on H100 per call." in text


def test_text_without_gains_is_unchanged_ruff_style(findings):
    plain = [f for f in findings if f.gain is None]
    text = render_text(plain)
    assert "expected saving" not in text.lower()
    assert summary(plain).startswith("Found 2 errors.")


def test_json_keeps_ruffs_list_shape_with_gain_per_object(findings, catalog):
    data = json.loads(render_json(findings, catalog))
    assert isinstance(data, list) and len(data) == len(findings)
    assert data[0]["gain"] == {"launches": 2, "bytes": 1_500_000, "time_us": 12.5, "device": "H100"}
    assert data[1]["gain"] is None
    assert data[2]["filename"] == "ünï/模型.py"
