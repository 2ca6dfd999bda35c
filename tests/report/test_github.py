"""GitHub workflow-command annotations and their escaping."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuselint.findings import Finding, Span
from fuselint.report.github import escape_data, escape_property, render_github

# The parser GitHub's runner applies, written from its documented rules: a command is
# `::name key=value,key=value::message`, properties split on `,` and the first `=`.
COMMAND = re.compile(r"^::(?P<name>[a-z]+) (?P<props>[^:]*)::(?P<message>.*)$")


def _unescape(text: str) -> str:
    return re.sub(
        r"%(25|0D|0A|3A|2C)", lambda m: {"25": "%", "0D": "\r", "0A": "\n", "3A": ":", "2C": ","}[m[1]], text
    )


def _parse(line: str) -> tuple[str, dict[str, str], str]:
    match = COMMAND.match(line)
    assert match, line
    props = dict(p.split("=", 1) for p in match["props"].split(","))
    return match["name"], {k: _unescape(v) for k, v in props.items()}, _unescape(match["message"])


def test_simple_annotation_has_ruffs_shape(catalog, project):
    finding = Finding("FL101", "`.item()` syncs", Span("src/model.py", 4, 9, 4, 23))
    assert render_github([finding], catalog) == (
        "::error title=fuselint (FL101),file=src/model.py,line=4,col=9,endLine=4,endColumn=23"
        "::src/model.py:4:9: FL101 (host-sync) `.item()` syncs\n"
    )


def test_one_line_per_finding_and_each_parses_back(findings, catalog):
    lines = render_github(findings, catalog).splitlines()
    assert len(lines) == len(findings)
    for line, finding in zip(lines, findings):
        name, props, message = _parse(line)
        s = finding.span
        assert name == "error"
        assert props == {
            "title": f"fuselint ({finding.code})",
            "file": s.path,
            "line": str(s.line),
            "col": str(s.column),
            "endLine": str(s.end_line),
            "endColumn": str(s.end_column),
        }
        assert message.startswith(f"{s.path}:{s.line}:{s.column}: {finding.code} ")
        assert finding.message in message


def test_commas_and_colons_in_a_path_are_escaped_in_properties(findings, catalog):
    line = render_github([findings[1]], catalog)
    assert "file=dir with space/a%2Cb.py," in line
    tricky = Finding("FL101", "m", Span("C:/weird:name,x.py", 1, 1, 1, 2))
    assert "file=C%3A/weird%3Aname%2Cx.py," in render_github([tricky], catalog)


def test_message_escapes_percent_and_newlines_but_keeps_colons(findings, catalog):
    line = render_github([findings[2]], catalog)
    assert line.count("\n") == 1 and "\r" not in line  # one physical line
    message = line.split("::", 2)[2]
    assert "100%25 of it" in message
    assert "a: b, c%0D%0Asecond line" in message


def test_escape_order_does_not_double_escape():
    assert escape_data("%0A\n") == "%250A%0A"
    assert escape_property("50%:,") == "50%25%3A%2C"


def test_gain_is_in_the_message(findings, catalog):
    line = render_github([findings[0]], catalog)
    assert line.rstrip("\n").endswith("(expected saving: 2 launches, 1.5 MB, ~12.5 µs on H100)")


def test_no_findings_no_output(catalog):
    assert render_github([], catalog) == ""


def test_root_makes_paths_relative_to_the_repository(findings, catalog, project, monkeypatch):
    monkeypatch.chdir(project / "src")
    inside = Finding("FL101", "m", Span("model.py", 4, 9, 4, 23))
    line = render_github([inside], catalog, root=project)
    assert "file=src/model.py," in line and "::src/model.py:4:9: FL101" in line
    # Outside the root the path stays as given rather than turning into ../ noise.
    outside = Finding("FL101", "m", Span("/elsewhere/x.py", 1, 1, 1, 2))
    assert "file=/elsewhere/x.py," in render_github([outside], catalog, root=project)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(min_size=1).filter(lambda p: p.strip()), message=st.text())
def test_any_path_and_message_round_trip(catalog, path, message):
    line = render_github([Finding("FL101", message, Span(path, 3, 1, 4, 2))], catalog)
    assert line.endswith("\n") and "\n" not in line[:-1] and "\r" not in line
    _name, props, parsed = _parse(line[:-1])
    assert props["file"] == path
    assert parsed == f"{path}:3:1: FL101 (host-sync) {message}"
