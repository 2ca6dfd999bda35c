"""The CLI in a demanding user's hands: read-only files under --fix, selectors with typos,
machine-readable output that the user's own prints must not corrupt, reports into new folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli_runner import run as _run

EXPM1 = "import torch\n\n\ndef f(x):\n    return torch.exp(x) - 1\n"
# FL210's fix (`torch.expm1`) is unsafe (more exact near zero, so not bit-equal): the tests of
# what `--fix` does with a file ask for unsafe fixes.


def test_fix_on_a_read_only_file_is_an_error_and_leaves_it_untouched(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(EXPM1)
    os.chmod(path, 0o444)
    result = _run(["check", "--no-cache", "--fix", "--unsafe-fixes", "m.py"], tmp_path)
    assert result.exit_code == 2
    assert "m.py: cannot write the fix" in result.stderr
    assert path.read_text() == EXPM1
    assert "m.py:5:12: FL210" in result.stdout, "the unfixed finding is still reported"


def test_unknown_select_code_is_a_usage_error(tmp_path):
    (tmp_path / "m.py").write_text(EXPM1)
    for option in (["--select", "FL21O"], ["--ignore", "XYZ"], ["--select", "FL210,FL999"]):
        result = _run(["check", "--no-cache", *option, "m.py"], tmp_path)
        assert result.exit_code == 2, option
        assert "unknown rule selector" in result.stderr


def test_known_selectors_and_all_still_work(tmp_path):
    (tmp_path / "m.py").write_text(EXPM1)
    for option in (["--select", "fl2"], ["--select", "ALL"], ["--ignore", "FL1,FL000"]):
        assert _run(["check", "--no-cache", *option, "m.py"], tmp_path).exit_code == 1, option


def test_unknown_code_in_the_config_is_a_usage_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fuselint]\nignore = ["FL1O3"]\n')
    (tmp_path / "m.py").write_text(EXPM1)
    result = _run(["check", "--no-cache", "m.py"], tmp_path)
    assert result.exit_code == 2
    assert "FL1O3" in result.stderr


def test_statistics_in_json_is_json(tmp_path):
    (tmp_path / "m.py").write_text(EXPM1)
    result = _run(["check", "--no-cache", "--format", "json", "--statistics", "m.py"], tmp_path)
    assert result.exit_code == 1
    rows = json.loads(result.stdout)
    assert rows == [{"code": "FL210", "name": "exp-minus-one", "count": 1, "fixable": True}]


def test_output_file_in_a_new_folder_is_created(tmp_path):
    (tmp_path / "m.py").write_text(EXPM1)
    result = _run(["check", "--no-cache", "--format", "json", "-o", "reports/ci/out.json", "m.py"], tmp_path)
    assert result.exit_code == 1
    assert json.loads((tmp_path / "reports" / "ci" / "out.json").read_text())[0]["code"] == "FL210"


NOISY_MODEL = """\
import torch
from torch import nn

print("importing the model file")


class Noisy(nn.Module):
    def forward(self, x):
        print("forward ran")
        return torch.relu(x) + 1


def entry():
    print("building the model")
    return Noisy(), (torch.randn(2, 4),)
"""


def test_user_prints_do_not_corrupt_json_from_check_entry(tmp_path):
    (tmp_path / "noisy.py").write_text(NOISY_MODEL)
    result = _run(
        ["check", "--no-cache", "--format", "json", "--entry", "noisy.py:entry", "noisy.py"], tmp_path
    )
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)
    assert {r["code"] for r in rows} >= {"FL103"}
    assert "building the model" in result.stderr


def test_user_prints_do_not_corrupt_json_from_verify(tmp_path):
    (tmp_path / "noisy.py").write_text(NOISY_MODEL)
    args = ["verify", "--device", "cpu", "--backend", "eager", "--no-fixed", "--format", "json"]
    result = _run([*args, "--entry", "noisy.py:entry"], tmp_path)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert "forward ran" not in result.stderr, "a model run many times must not flood stderr"
    assert "the model printed" in result.stderr and "--verbose shows them" in result.stderr
    verbose = _run([*args, "--verbose", "--entry", "noisy.py:entry"], tmp_path)
    json.loads(verbose.stdout)
    assert "importing the model file" in verbose.stderr and "forward ran" in verbose.stderr


def test_force_exclude_applies_the_config_excludes_to_named_files(tmp_path):
    # pre-commit passes `scratch/m.py` explicitly; the project excluded `scratch`.
    (tmp_path / "pyproject.toml").write_text('[tool.fuselint]\nextend-exclude = ["scratch"]\n')
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "m.py").write_text(EXPM1)
    (tmp_path / "kept.py").write_text(EXPM1)
    named = _run(["check", "--no-cache", "scratch/m.py", "kept.py"], tmp_path)
    assert "scratch/m.py" in named.stdout, "without the flag a named file is checked, as in ruff"
    forced = _run(["check", "--no-cache", "--force-exclude", "scratch/m.py", "kept.py"], tmp_path)
    assert forced.exit_code == 1
    assert "scratch/m.py" not in forced.stdout and "kept.py:5:12: FL210" in forced.stdout
    only_excluded = _run(["check", "--no-cache", "--force-exclude", "scratch/m.py"], tmp_path)
    assert only_excluded.exit_code == 0


def test_force_exclude_can_be_set_in_the_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fuselint]\nexclude = ["gen_*.py"]\nforce-exclude = true\n'
    )
    (tmp_path / "gen_model.py").write_text(EXPM1)
    assert _run(["check", "--no-cache", "gen_model.py"], tmp_path).exit_code == 0


def test_graph_into_a_new_folder_is_written(tmp_path):
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "functional.py"
    result = _run(["graph", "--entry", f"{fixture}:entry", "-o", "out/graphs/g.dot"], tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "graphs" / "g.dot").read_text().startswith("digraph")


BREAK_AND_FIX = """\
import sys

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        y = x * torch.sigmoid(x)
        sys.stdout.write("side effect\\n")
        return y


def entry():
    return Model(), (torch.randn(2, 4),)
"""


def test_fix_keeps_the_traced_graph_breaks_of_the_fixed_file(tmp_path):
    (tmp_path / "model.py").write_text(BREAK_AND_FIX)
    args = [
        "check",
        "--no-cache",
        "--fix",
        "--unsafe-fixes",
        "--no-prove",
        "--format",
        "json",
        "--entry",
        "model.py:entry",
        "model.py",
    ]
    result = _run(args, tmp_path)
    fixed = (tmp_path / "model.py").read_text()
    assert "F.silu(x)" in fixed and "import torch.nn.functional as F" in fixed
    rows = json.loads(result.stdout)
    # The added import moved the break from line 9 to 10; it follows its line.
    assert [(r["code"], r["location"]["row"]) for r in rows] == [("FL150", 10)]
    assert "sys.stdout.write" in fixed.splitlines()[9]
    assert result.exit_code == 1


def test_noqa_silences_a_traced_graph_break(tmp_path):
    text = BREAK_AND_FIX.replace('("side effect\\n")', '("side effect\\n")  # noqa: FL150')
    (tmp_path / "model.py").write_text(text)
    args = ["check", "--no-cache", "--format", "json", "--entry", "model.py:entry", "model.py"]
    rows = json.loads(_run(args, tmp_path).stdout)
    assert [r["code"] for r in rows] == ["FL205"]


def test_recording_a_baseline_while_a_fix_cannot_be_written_is_not_a_pass(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(EXPM1)
    os.chmod(path, 0o444)
    result = _run(
        [
            "check",
            "--no-cache",
            "--fix",
            "--unsafe-fixes",
            "--baseline",
            "b.json",
            "--update-baseline",
            "m.py",
        ],
        tmp_path,
    )
    assert result.exit_code == 2
    assert "m.py: cannot write the fix" in result.stderr
    assert path.read_text() == EXPM1
    assert (tmp_path / "b.json").exists()  # the findings as they stand are recorded
