"""The CLI as a user meets it: exit codes, one-line errors, --fix/--diff, formats, python -m."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_runner import run as _run

ROOT = Path(__file__).resolve().parent.parent

PRINTING = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)
        return torch.relu(x)
"""

CLEAN = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def test_clean_tree_exits_zero(tmp_path):
    (tmp_path / "model.py").write_text(CLEAN)
    result = _run(["check", "--no-cache", "."], tmp_path)
    assert result.exit_code == 0, result.output
    assert "All checks passed" in result.output


def test_finding_exits_one_with_ruff_style_line(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "model.py"], tmp_path)
    assert result.exit_code == 1
    assert "model.py:7:9: FL103 " in result.output
    assert "Found 1 error." in result.output


def test_exit_zero_and_statistics(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--exit-zero", "--statistics", "."], tmp_path)
    assert result.exit_code == 0
    assert "FL103" in result.output and "print-in-forward" in result.output


def test_missing_path_is_a_one_line_error(tmp_path):
    result = _run(["check", "nope/"], tmp_path)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "nope/" in result.output and "Traceback" not in result.output


def test_bad_config_is_a_one_line_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint]\nselect = 3\n")
    (tmp_path / "model.py").write_text(CLEAN)
    result = _run(["check", "."], tmp_path)
    assert result.exit_code == 2
    assert "select must be a list of strings" in result.output


def test_unknown_config_key_is_reported(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint]\nselct = ['FL1']\n")
    result = _run(["check", "."], tmp_path)
    assert result.exit_code == 2 and "selct" in result.output


def test_invalid_toml_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint\n")
    result = _run(["check", "."], tmp_path)
    assert result.exit_code == 2 and "pyproject.toml" in result.output


def test_bad_option_exits_two(tmp_path):
    result = _run(["check", "--format", "xml", "."], tmp_path)
    assert result.exit_code == 2


def test_syntax_error_is_a_finding_and_the_run_goes_on(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    (tmp_path / "model.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "."], tmp_path)
    assert result.exit_code == 1
    assert "broken.py:2:" in result.output and "FL000" in result.output
    assert "FL103" in result.output


def test_non_utf8_file_is_a_finding(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"import torch\nname = '\xe9t\xe9'\n")
    result = _run(["check", "--no-cache", "."], tmp_path)
    assert result.exit_code == 1
    assert "latin.py:1:1: FL000" in result.output


def test_declared_latin1_file_is_read(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9t\xe9'\n")
    result = _run(["check", "--no-cache", "."], tmp_path)
    assert result.exit_code == 0, result.output


def test_select_and_ignore_on_the_command_line(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    assert _run(["check", "--no-cache", "--ignore", "FL103", "."], tmp_path).exit_code == 0
    assert _run(["check", "--no-cache", "--select", "FL0", "."], tmp_path).exit_code == 0
    assert _run(["check", "--no-cache", "--select", "FL1", "."], tmp_path).exit_code == 1


def test_noqa_suppresses(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING.replace("print(x.shape)", "print(x.shape)  # noqa: FL103"))
    assert _run(["check", "--no-cache", "."], tmp_path).exit_code == 0
    (tmp_path / "model.py").write_text(PRINTING.replace("print(x.shape)", "print(x.shape)  # noqa: FL101"))
    assert _run(["check", "--no-cache", "."], tmp_path).exit_code == 1
    (tmp_path / "model.py").write_text(PRINTING.replace("print(x.shape)", "print(x.shape)  # noqa"))
    assert _run(["check", "--no-cache", "."], tmp_path).exit_code == 0


def test_per_file_ignores_and_exclude(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fuselint]\nper-file-ignores = {"debug_*.py" = ["FL103"]}\nextend-exclude = ["scratch"]\n'
    )
    (tmp_path / "debug_model.py").write_text(PRINTING)
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "model.py").write_text(PRINTING)
    assert _run(["check", "--no-cache", "."], tmp_path).exit_code == 0
    (tmp_path / "model.py").write_text(PRINTING)
    assert _run(["check", "--no-cache", "."], tmp_path).exit_code == 1


def test_virtualenvs_and_git_are_skipped(tmp_path):
    for folder in (".git", ".venv", "build", "node_modules"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.py").write_text(PRINTING)
    assert _run(["check", "--no-cache", "."], tmp_path).exit_code == 0


def test_json_format_has_ruff_fields(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--format", "json", "."], tmp_path)
    rows = json.loads(result.output)
    assert rows[0]["code"] == "FL103"
    assert rows[0]["location"] == {"row": 7, "column": 9}
    assert rows[0]["end_location"] == {"row": 7, "column": 23}
    assert rows[0]["fix"]["applicability"] == "unsafe" and rows[0]["url"]  # the is_compiling guard


def test_cache_gives_same_findings_and_sees_edits(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(PRINTING)
    first = _run(["check", "."], tmp_path)
    second = _run(["check", "."], tmp_path)
    assert first.output == second.output and second.exit_code == 1
    assert (tmp_path / ".fuselint_cache").is_dir()
    model.write_text(CLEAN + "\n")
    assert _run(["check", "."], tmp_path).exit_code == 0


def test_rule_explains_in_ruff_order(tmp_path):
    result = _run(["rule", "FL103"], tmp_path)
    assert result.exit_code == 0
    order = [
        result.output.index(h)
        for h in (
            "## What it does",
            "## Why it blocks fusion",
            "## Example",
            "## Use instead",
            "## Fix safety",
        )
    ]
    assert order == sorted(order)
    assert _run(["rule", "print-in-forward"], tmp_path).exit_code == 0
    unknown = _run(["rule", "FL999"], tmp_path)
    assert unknown.exit_code == 2 and "FL999" in unknown.output


def test_rules_lists_the_catalog(tmp_path):
    result = _run(["rules"], tmp_path)
    assert result.exit_code == 0 and "FL000" in result.output and "FL103" in result.output


def test_python_dash_m_runs_the_same_cli(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "fuselint", "check", "--no-cache", "model.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1 and "FL103" in proc.stdout


def test_check_runs_with_torch_unimportable(tmp_path):
    """`fuselint check` must neither need nor import torch or triton."""
    (tmp_path / "model.py").write_text(PRINTING)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'triton'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    script = (
        "import sys, runpy\n"
        "sys.argv = ['fuselint', 'check', '--no-cache', 'model.py']\n"
        "try:\n"
        "    runpy.run_module('fuselint', run_name='__main__')\n"
        "finally:\n"
        "    assert not any(m.split('.')[0] in ('torch', 'triton') for m in sys.modules), 'torch was imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 1, proc.stderr
    assert "FL103" in proc.stdout
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env)
    assert probe.returncode != 0 and "blocked torch" in probe.stderr


def test_every_format_renders(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    for fmt, marker in (
        ("sarif", '"version": "2.1.0"'),
        ("github", "::error title=fuselint (FL103)"),
        ("markdown", "FL103"),
    ):
        result = _run(["check", "--no-cache", "--format", fmt, "."], tmp_path)
        assert result.exit_code == 1 and marker in result.output, fmt


def test_baseline_hides_known_findings_and_survives_line_moves(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(PRINTING)
    recorded = _run(["check", "--no-cache", "--baseline", "fl.json", "--update-baseline", "."], tmp_path)
    assert recorded.exit_code == 0 and (tmp_path / "fl.json").is_file()
    model.write_text("# a comment that moves every line down\n\n" + PRINTING)
    assert _run(["check", "--no-cache", "--baseline", "fl.json", "."], tmp_path).exit_code == 0
    model.write_text(PRINTING.replace("print(x.shape)", "print(x.shape)\n        print(x.dtype)"))
    new = _run(["check", "--no-cache", "--baseline", "fl.json", "."], tmp_path)
    assert new.exit_code == 1 and "print(x.dtype)" not in new.output.split("FL103")[0]
    assert new.output.count("FL103 ") == 1


def test_baseline_errors_exit_two(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    assert _run(["check", "--update-baseline", "."], tmp_path).exit_code == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert _run(["check", "--baseline", "bad.json", "."], tmp_path).exit_code == 2


def test_gain_threshold_lets_findings_without_gain_pass(tmp_path):
    (tmp_path / "model.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--fail-on-gain-launches", "1", "."], tmp_path)
    assert result.exit_code == 0 and "FL103" in result.output
