"""`fuselint rules` and `fuselint rule CODE`: the table says which rules these settings never run."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run as _run

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.report.rules import explain, rules_table

USER_RULE = '''
code = "XL001"
name = "double-neg"
kind = "pattern"
summary = "`-(-x)` is `x`."
message = "`-(-x)`: drop both minus signs"
why = "Two negations are two kernels that do nothing."
use_instead = "`x`."
fix = "safe"
bad = ["""
import torch

def f(x):
    return torch.neg(torch.neg(x))
"""]
good = ["""
import torch

def f(x):
    return torch.neg(x)
"""]
fixed = ["""
import torch

def f(x):
    return x
"""]

[pattern]
match = "torch.neg(torch.neg($x))"
replace = "$x"
'''


def _project(tmp_path: Path, select: str) -> Path:
    (tmp_path / "my_rules").mkdir()
    (tmp_path / "my_rules" / "XL001.toml").write_text(USER_RULE)
    (tmp_path / "pyproject.toml").write_text(f"[tool.fuselint]\nextra-rules = ['my_rules']\n{select}\n")
    return tmp_path


def test_rules_marks_a_user_rule_outside_select(tmp_path):
    result = _run(["rules"], _project(tmp_path, ""))
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("XL001")]
    assert "(not selected) `-(-x)` is `x`." in row
    (builtin,) = [line for line in result.output.splitlines() if line.startswith("FL201")]
    assert "not selected" not in builtin


def test_rules_json_says_selected_per_rule(tmp_path):
    rows = json.loads(_run(["rules", "--format", "json"], _project(tmp_path, "")).output)
    selected = {r["code"]: r["selected"] for r in rows}
    assert selected["XL001"] is False and selected["FL201"] is True
    assert selected["FL001"] is False  # opt-in, like ruff's RUF100


def test_rules_leaves_a_selected_user_rule_unmarked(tmp_path):
    project = _project(tmp_path, "extend-select = ['XL001']")
    result = _run(["rules"], project)
    assert "not selected" not in next(line for line in result.output.splitlines() if line.startswith("XL"))
    rows = json.loads(_run(["rules", "--format", "json"], project).output)
    assert next(r for r in rows if r["code"] == "XL001")["selected"] is True


def test_ignored_rule_is_marked():
    table = rules_table(load_catalog(), "markdown", Config(ignore=("FL201",)))
    (row,) = [line for line in table.splitlines() if line.startswith("| FL201 ")]
    assert "| (not selected) " in row


def test_table_without_settings_marks_nothing():
    """The README's table is the catalog, not one project's selection."""
    for fmt in ("text", "markdown", "json"):
        assert "not selected" not in rules_table(load_catalog(), fmt)
    assert all("selected" not in r for r in json.loads(rules_table(load_catalog(), "json")))


def test_explain_follows_ruffs_sections():
    page = explain(load_catalog()["FL201"])
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == [
        "## What it does",
        "## Why it blocks fusion",
        "## Example",
        "## Use instead",
        "## Fix safety",
    ]
    assert page.startswith("# ") and "(FL201)" in page.splitlines()[0]
