"""The traced side of the CLI: `check --entry` and `graph`, on the bundled trace fixtures."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from fuselint.cli import main

TRACE = Path(__file__).resolve().parent.parent / "fixtures" / "trace"


def _invoke(args):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_check_entry_merges_the_dynamo_break_into_the_static_finding():
    fixture = TRACE / "print_in_forward.py"
    result = _invoke(["check", "--no-cache", "--format", "json", "--entry", f"{fixture}:entry", str(fixture)])
    assert result.exit_code == 1
    rows = json.loads(result.stdout)  # stderr may hold a note on the traced mode
    at_print = [r for r in rows if "print(" in fixture.read_text().splitlines()[r["location"]["row"] - 1]]
    assert len(at_print) == 1, "the static finding and the traced break on one line are reported once"
    assert at_print[0]["code"] == "FL103" and at_print[0]["details"]["gb_id"] == "gb0059"


def test_a_graph_break_carries_its_fusion_saving_into_the_report_and_the_gate(tmp_path):
    fixture = TRACE / "item_branch.py"
    args = ["check", "--no-cache", "--entry", f"{fixture}:entry", str(fixture)]
    rows = json.loads(_invoke([*args, "--format", "json"]).stdout)
    (at_item,) = [r for r in rows if r["details"].get("gb_id") == "gb0124"]
    assert at_item["code"] == "FL101" and at_item["gain"]["launches"] == 1
    # a threshold gate now sees the break's saving
    assert _invoke([*args, "--fail-on-gain-launches", "1"]).exit_code == 1
    assert _invoke([*args, "--fail-on-gain-launches", "2"]).exit_code == 0


def test_check_entry_alone_reports_traced_breaks_and_model_summary(tmp_path):
    fixture = TRACE / "loop_break.py"
    result = _invoke(
        ["check", "--no-cache", "--format", "markdown", "--entry", f"{fixture}:entry", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "FL150" in result.output and "Expected speedup" in result.output


def test_graph_json_holds_nodes_breaks_and_the_plan(tmp_path):
    out = tmp_path / "g.json"
    result = _invoke(["graph", "--entry", f"{TRACE / 'loop_break.py'}:entry", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["nodes"] and data["edges"] and data["breaks"]
    plan = data["plan"]
    assert plan["eager"]["launches"] > plan["fused"]["launches"] > 0
    assert plan["groups"] and all(n["group"] is not None for n in data["nodes"] if n["kind"] == "pointwise")


def test_graph_svg_parses(tmp_path):
    out = tmp_path / "g.svg"
    assert (
        _invoke(["graph", "--entry", f"{TRACE / 'transformer_block.py'}:entry", "-o", str(out)]).exit_code
        == 0
    )
    root = ET.fromstring(out.read_text())
    assert root.tag.endswith("svg") and "transformer_block.py" in out.read_text()


def test_bad_entries_are_one_line_errors(tmp_path):
    for spec in ("nope.py:x", f"{TRACE / 'loop_break.py'}:missing", "no_colon"):
        result = _invoke(["check", "--no-cache", "--entry", spec, str(tmp_path)])
        assert result.exit_code == 2, spec
        assert "Traceback" not in result.output
    bad_suffix = _invoke(
        ["graph", "--entry", f"{TRACE / 'loop_break.py'}:entry", "-o", str(tmp_path / "g.png")]
    )
    assert bad_suffix.exit_code == 2


def test_graph_of_two_entries_keeps_their_graphs_apart(tmp_path):
    out = tmp_path / "g.json"
    entries = [f"{TRACE / 'item_branch.py'}:entry", f"{TRACE / 'loop_break.py'}:entry"]
    result = _invoke(["graph", "--entry", entries[0], "--entry", entries[1], "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    names = {g["name"] for g in data["graphs"]}
    assert any(n.startswith("item_branch:") for n in names) and any(
        n.startswith("loop_break:") for n in names
    )
    assert len(data["plan"]["models"]) == 2
    ids = [n["id"] for n in data["nodes"]]
    assert len(ids) == len(set(ids))


def test_unknown_target_gpu_is_a_usage_error(tmp_path):
    entry = f"{TRACE / 'loop_break.py'}:entry"
    for args in (["graph", "--entry", entry, "-o", str(tmp_path / "g.json")], ["verify", "--entry", entry]):
        result = _invoke([*args, "--target", "TPU9"])
        assert result.exit_code == 2 and "TPU9" in result.output, args


def test_a_failing_forward_is_one_line_naming_the_users_error_and_exits_2(tmp_path):
    fixture = TRACE / "failing_forward.py"
    line = next(
        n for n, text in enumerate(fixture.read_text().splitlines(), 1) if "h @ torch.ones(3, 3)" in text
    )
    for device in ("cpu", "meta"):  # a trace that did not complete is never a pass, meta included
        result = _invoke(
            ["check", "--no-cache", "--device", device, "--entry", f"{fixture}:entry", str(tmp_path)]
        )
        assert result.exit_code == 2, (device, result.output)
        (only,) = result.output.strip().splitlines()
        assert only.startswith("fuselint: error:") and f"failing_forward.py:{line} in forward" in only
        assert "RuntimeError: a and b must have same reduction dim" in only and "--verbose" in only
        assert "All checks passed" not in result.output


def test_verbose_shows_the_full_log_of_a_failed_run(capsys):
    import click
    import pytest

    from fuselint.cli import UsageFailure, check, trace_entries

    with click.Context(check) as context:
        context.params["verbose"] = True
        with pytest.raises(UsageFailure):
            trace_entries([f"{TRACE / 'failing_forward.py'}:entry"], None, False, "H200")
    err = capsys.readouterr().err
    assert "failed while attempting to run meta for aten.mm" in err and "Traceback" in err


def test_check_says_which_mode_it_traced_when_not_the_factorys(tmp_path):
    fixture = TRACE / "dropout_mlp.py"
    noted = _invoke(["check", "--no-cache", "--entry", f"{fixture}:entry", str(tmp_path)])
    assert "fuselint: note:" in noted.output and "traced in eval mode" in noted.output
    quiet = _invoke(["check", "--no-cache", "--entry", f"{fixture}:inference", str(tmp_path)])
    assert "note:" not in quiet.output
