"""Writing a rule of your own: `fuselint rule --test`, and refusals of rules that would never run."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run as _run

from fuselint.catalog import CatalogError, load_catalog
from fuselint.config import Config
from fuselint.source.lint import lint_text

pytest.importorskip("torch")

RELU_WHERE = '''
code = "XL001"
name = "where-relu"
kind = "pattern"
summary = "`torch.where(x > 0, x, 0.0)` is `torch.relu(x)`."
message = "`torch.where(x > 0, x, 0)`: use `torch.relu(x)`"
why = "One kernel that every backend knows, instead of a comparison and a select."
use_instead = "`torch.relu(x)`."
fix = "safe"
bad = ["""
import torch

def act(x):
    return torch.where(x > 0, x, 0.0)
"""]
good = ["""
import torch

def act(x):
    return torch.where(x > 1, x, 0.0)
"""]
fixed = ["""
import torch

def act(x):
    return torch.relu(x)
"""]

[pattern]
match = "torch.where($x > 0, $x, 0.0)"
replace = "REPLACE"
'''


def _rules(tmp_path: Path, replace: str = "torch.relu($x)", **edits: str) -> Path:
    folder = tmp_path / "my_rules"
    folder.mkdir(exist_ok=True)
    text = RELU_WHERE.replace("REPLACE", replace)
    for old, new in edits.items():
        text = text.replace(old, new)
    (folder / "XL001.toml").write_text(text)
    return folder


def test_rule_test_passes_on_a_builtin_rule(tmp_path):
    result = _run(["rule", "--test", "FL211"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "FL211 bad[0] is flagged" in result.output
    assert "match and replace agree" in result.output
    assert result.output.strip().endswith("6 passed, 0 failed")


def test_rule_test_passes_on_every_builtin_rule(tmp_path):
    """With no argument, every built-in rule: examples, fixes, proofs, traced graph rules."""
    result = _run(["rule", "--test"], tmp_path)
    assert result.exit_code == 0, result.output
    tested = {line.split()[1] for line in result.output.splitlines() if line.startswith("ok ")}
    assert tested == {r.code for r in load_catalog()}
    assert result.output.strip().endswith(" 0 failed")


def test_rule_test_fails_on_a_broken_builtin_rule(tmp_path):
    """FL211 with `log1p(x)` replaced by `log(x)`: NaN on negative x once counted as no error."""
    from fuselint.catalog import builtin_rules_dir

    folder = tmp_path / "broken"
    folder.mkdir()
    text = (builtin_rules_dir() / "FL211.toml").read_text().replace('"FL211"', '"XL211"')
    (folder / "XL211.toml").write_text(
        text.replace('replace = "torch.log1p($x)"', 'replace = "torch.log($x)"')
    )
    result = _run(["rule", "--test", str(folder)], tmp_path)
    assert result.exit_code == 1, result.output
    assert "FAIL XL211 match and replace agree" in result.output


def test_rule_test_passes_on_a_good_user_rule(tmp_path):
    folder = _rules(tmp_path)
    result = _run(["rule", "--test", str(folder / "XL001.toml")], tmp_path)
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output


def test_rule_test_fails_on_a_wrong_replacement(tmp_path):
    """`torch.abs` is not `where(x > 0, x, 0)`: the numeric proof and the fixed example both say so."""
    folder = _rules(tmp_path, replace="torch.abs($x)")
    result = _run(["rule", "--test", str(folder)], tmp_path)
    assert result.exit_code == 1, result.output
    assert "FAIL XL001 match and replace agree" in result.output
    assert "FAIL XL001 fixed[0] is what --fix writes" in result.output
    assert "relative error" in result.output


def test_rule_test_fails_on_an_example_that_is_not_flagged(tmp_path):
    folder = _rules(tmp_path, **{"torch.where(x > 0, x, 0.0)": "torch.where(x >= 0, x, 0.0)"})
    result = _run(["rule", "--test", str(folder / "XL001.toml")], tmp_path)
    assert result.exit_code == 1
    assert "FAIL XL001 bad[0] is flagged" in result.output


@pytest.mark.parametrize(
    "spelling",
    [
        "torch.where(x > 0, x, 0.0)",
        "torch.where(0 < x, x, 0.0)",
        "torch.where(x.gt(0), x, 0.0)",
        "torch.where(torch.greater(x, 0), x, 0.0)",
    ],
)
def test_a_comparison_pattern_matches_every_spelling(tmp_path, spelling):
    catalog = load_catalog((str(_rules(tmp_path)),))
    source = f"import torch\n\ndef act(x):\n    return {spelling}\n"
    assert [f.code for f in lint_text("m.py", source, catalog, Config(select=("XL001",)))] == ["XL001"]


def test_a_comparison_pattern_is_not_a_lookalike(tmp_path):
    catalog = load_catalog((str(_rules(tmp_path)),))
    for other in ("torch.where(x < 0, x, 0.0)", "torch.where(x > 0, 0.0, x)", "torch.where(x != 0, x, 0.0)"):
        source = f"import torch\n\ndef act(x):\n    return {other}\n"
        assert lint_text("m.py", source, catalog, Config(select=("XL001",))) == [], other


def _project(tmp_path: Path, select: str) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.fuselint]\nextra-rules = ["my_rules"]\nselect = {select}\n'
    )
    (tmp_path / "m.py").write_text("import torch\n\ndef act(x):\n    return torch.where(x > 0, x, 0.0)\n")


def test_an_unselected_user_rule_is_an_error_not_silence(tmp_path):
    _rules(tmp_path)
    _project(tmp_path, '["FL"]')
    result = _run(["check", "--no-cache", "m.py"], tmp_path)
    assert result.exit_code == 2
    assert "XL001 is never run" in result.output and "extend-select" in result.output


def test_a_selected_user_rule_runs(tmp_path):
    _rules(tmp_path)
    _project(tmp_path, '["FL", "XL"]')
    result = _run(["check", "--no-cache", "m.py"], tmp_path)
    assert result.exit_code == 1, result.output
    assert "m.py:4:12: XL001" in result.output


def test_a_pattern_that_can_never_match_is_refused(tmp_path):
    _rules(
        tmp_path,
        **{'match = "torch.where($x > 0, $x, 0.0)"': 'match = "torch.where($x if $x else $x, $x, 0.0)"'},
    )
    _project(tmp_path, '["FL", "XL"]')
    result = _run(["check", "--no-cache", "m.py"], tmp_path)
    assert result.exit_code == 2
    assert "can never match" in result.output and "$x if $x else $x" in result.output


def test_a_user_rule_of_kind_source_is_refused(tmp_path):
    folder = _rules(tmp_path, **{'kind = "pattern"': 'kind = "source"'})
    with pytest.raises(CatalogError, match='must be kind = "pattern"'):
        load_catalog((str(folder),))
