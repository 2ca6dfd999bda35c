"""The options a ruff user reaches for, behaving as they do in ruff: --output-format,
--extend-select, --exclude/--extend-exclude, --add-noqa, unused noqa (FL001), --show-fixes,
--stdin-filename, -q/-s/-v, and `fuselint clean`."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run as _run

from fuselint.cli import main

PRINTING = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)
        return torch.relu(x)
"""

SILU = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)
        return x * torch.sigmoid(x)
"""

# FL205's fix is unsafe (F.silu rounds differently from x * sigmoid(x)); FL220's (cat of
# unsqueezed tensors -> stack) is bit-equal, so safe: the tests of what `--fix` writes use it.
STACK = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)
        return torch.cat([x.unsqueeze(0), x.unsqueeze(0)])
"""


# ---------------------------------------------------------------- --output-format


def test_output_format_is_an_alias_of_format(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--output-format", "json", "m.py"], tmp_path)
    assert result.exit_code == 1
    assert [f["code"] for f in json.loads(result.stdout)] == ["FL103"]


def test_output_format_concise_and_full_are_text_without_and_with_the_source(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    concise = _run(["check", "--no-cache", "--output-format", "concise", "m.py"], tmp_path)
    full = _run(["check", "--no-cache", "--output-format", "full", "m.py"], tmp_path)
    assert "m.py:7:9: FL103" in concise.stdout and "print(x.shape)" not in concise.stdout
    assert "m.py:7:9: FL103" in full.stdout and "   7 |         print(x.shape)" in full.stdout


# ---------------------------------------------------------------- selection and excludes


def test_extend_select_adds_to_the_selection_of_the_settings_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fuselint]\nselect = ["FL2"]\n')
    (tmp_path / "m.py").write_text(SILU)
    only_file = _run(["check", "--no-cache", "--output-format", "concise", "m.py"], tmp_path)
    assert "FL205" in only_file.stdout and "FL103" not in only_file.stdout
    extended = _run(["check", "--no-cache", "--extend-select", "FL103", "m.py"], tmp_path)
    assert "FL205" in extended.stdout and "FL103" in extended.stdout


def test_unknown_extend_select_is_a_one_line_error(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--extend-select", "FL9Z", "m.py"], tmp_path)
    assert result.exit_code == 2 and "FL9Z" in result.stderr


def test_extend_exclude_on_the_command_line_skips_a_folder(tmp_path):
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "m.py").write_text(PRINTING)
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--extend-exclude", "scratch", "."], tmp_path)
    assert "scratch" not in result.stdout and "Found 1 error." in result.stdout


def test_exclude_on_the_command_line_replaces_the_default_excludes(tmp_path):
    # `build/` is excluded by default; ruff's --exclude replaces that list.
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "m.py").write_text(PRINTING)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "m.py").write_text(PRINTING)
    default = _run(["check", "--no-cache", "--output-format", "concise", "."], tmp_path)
    assert "build" not in default.stdout and "old/m.py" in default.stdout
    replaced = _run(["check", "--no-cache", "--output-format", "concise", "--exclude", "old", "."], tmp_path)
    assert "build/m.py" in replaced.stdout and "old" not in replaced.stdout


# ---------------------------------------------------------------- --add-noqa and FL001


TRICKY = '''\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)  # why we print
        s = f"""{x.sum().item()}
"""
        t = x.max().item() \\
            + 1
        if x.sum() > 0:  # noqa: E501
            x = x + 1
        return x
'''

TRICKY_NOQA = '''\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)  # why we print  # noqa: FL103
        s = f"""{x.sum().item()}
"""  # noqa: FL101
        t = x.max().item() \\
            + 1  # noqa: FL101
        if x.sum() > 0:  # noqa: E501, FL102
            x = x + 1
        return x
'''


def test_add_noqa_silences_every_finding_without_breaking_a_string(tmp_path):
    (tmp_path / "m.py").write_text(TRICKY)
    before = _run(["check", "--no-cache", "--output-format", "concise", "m.py"], tmp_path)
    assert before.exit_code == 1 and "Found 4 errors." in before.stdout
    added = _run(["check", "--no-cache", "--add-noqa", "m.py"], tmp_path)
    assert added.exit_code == 0, added.output
    assert added.stderr.strip() == "Added 4 noqa directives."
    assert (tmp_path / "m.py").read_text() == TRICKY_NOQA
    again = _run(["check", "--no-cache", "--extend-select", "FL001", "m.py"], tmp_path)
    assert again.exit_code == 0 and "All checks passed!" in again.stdout
    # Nothing left to add: the file is untouched.
    twice = _run(["check", "--no-cache", "--add-noqa", "m.py"], tmp_path)
    assert twice.stderr.strip() == "Added 0 noqa directives."
    assert (tmp_path / "m.py").read_text() == TRICKY_NOQA


def test_add_noqa_keeps_crlf_line_endings(tmp_path):
    (tmp_path / "m.py").write_bytes(PRINTING.replace("\n", "\r\n").encode())
    _run(["check", "--no-cache", "--add-noqa", "m.py"], tmp_path)
    assert (tmp_path / "m.py").read_bytes() == PRINTING.replace(
        "print(x.shape)", "print(x.shape)  # noqa: FL103"
    ).replace("\n", "\r\n").encode()


def test_add_noqa_with_fix_is_a_usage_error(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "--add-noqa", "--fix", "m.py"], tmp_path)
    assert result.exit_code == 2
    assert "--add-noqa cannot be used with --fix" in result.stderr
    assert (tmp_path / "m.py").read_text() == PRINTING


STALE = PRINTING.replace("return torch.relu(x)", "return torch.relu(x)  # noqa: FL103, E501")


def test_unused_noqa_is_off_by_default_and_reported_when_selected(tmp_path):
    (tmp_path / "m.py").write_text(STALE)
    default = _run(["check", "--no-cache", "--output-format", "concise", "m.py"], tmp_path)
    assert "FL001" not in default.stdout
    selected = _run(
        ["check", "--no-cache", "--output-format", "concise", "--extend-select", "FL001", "m.py"], tmp_path
    )
    assert "m.py:8:31: FL001 [*] Unused `noqa` directive (unused: `FL103`)" in selected.stdout


def test_unused_noqa_fix_keeps_other_tools_codes_and_show_fixes_lists_it(tmp_path):
    (tmp_path / "m.py").write_text(STALE)
    result = _run(
        ["check", "--no-cache", "--extend-select", "FL001", "--fix", "--show-fixes", "m.py"], tmp_path
    )
    assert (tmp_path / "m.py").read_text() == PRINTING.replace(
        "return torch.relu(x)", "return torch.relu(x)  # noqa: E501"
    )
    assert "Fixed 1 error:\n- m.py:\n    1 × FL001 (unused-noqa)\n" in result.stdout
    assert result.exit_code == 1  # the print is still there


# ---------------------------------------------------------------- --show-fixes


def test_show_fixes_lists_the_fixes_per_file_before_the_summary(tmp_path):
    (tmp_path / "a.py").write_text(STACK)
    (tmp_path / "b.py").write_text(STACK)
    result = _run(
        ["check", "--no-cache", "--fix", "--show-fixes", "--output-format", "concise", "."], tmp_path
    )
    listing = "Fixed 2 errors:\n- a.py:\n    1 × FL220 (cat-of-unsqueeze)\n- b.py:\n    1 × FL220 (cat-of-unsqueeze)\n\n"
    assert listing in result.stdout
    assert result.stdout.index(listing) < result.stdout.index("Found 2 errors.")
    plain = _run(["check", "--no-cache", "--fix", "--output-format", "concise", "."], tmp_path)
    assert "×" not in plain.stdout


# ---------------------------------------------------------------- --stdin-filename


def test_stdin_gives_the_findings_of_the_file_under_its_name(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SILU)
    from_file = _run(["check", "--no-cache", "--output-format", "json", "pkg/m.py"], tmp_path)
    from_stdin = _run(
        ["check", "--output-format", "json", "--stdin-filename", "pkg/m.py"], tmp_path, stdin=SILU
    )
    assert from_stdin.exit_code == from_file.exit_code == 1
    assert json.loads(from_stdin.stdout) == json.loads(from_file.stdout)


def test_stdin_with_fix_prints_what_fixing_the_file_writes_and_reports_on_stderr(tmp_path):
    result = _run(["check", "--fix", "--stdin-filename", "m.py"], tmp_path, stdin=STACK)
    assert not (tmp_path / "m.py").exists()
    (tmp_path / "on_disk.py").write_text(STACK)
    _run(["check", "--no-cache", "--fix", "on_disk.py"], tmp_path)
    fixed = (tmp_path / "on_disk.py").read_text()
    assert "torch.stack([x, x])" in fixed
    assert result.stdout == fixed
    # The print is left: reported under the stdin name, on its line in the fixed source.
    line = fixed.splitlines().index("        print(x.shape)") + 1
    assert f"m.py:{line}:9: FL103" in result.stderr and "Fixed 1 error." in result.stderr
    assert result.exit_code == 1


def test_stdin_with_diff_prints_a_diff(tmp_path):
    result = _run(["check", "--diff", "--stdin-filename", "m.py"], tmp_path, stdin=STACK)
    assert result.exit_code == 1
    assert (
        "-        return torch.cat([x.unsqueeze(0), x.unsqueeze(0)])\n+        return torch.stack([x, x])"
        in result.stdout
    )


def test_stdin_honours_per_file_ignores_and_force_exclude(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fuselint]\nper-file-ignores = { "tests/*" = ["FL1"] }\nextend-exclude = ["gen"]\n'
    )
    ignored = _run(["check", "--stdin-filename", "tests/m.py"], tmp_path, stdin=PRINTING)
    assert ignored.exit_code == 0 and "All checks passed!" in ignored.stdout
    excluded = _run(
        ["check", "--force-exclude", "--fix", "--stdin-filename", "gen/m.py"], tmp_path, stdin=SILU
    )
    assert excluded.exit_code == 0 and excluded.stdout == SILU


def test_stdin_that_is_not_valid_text_is_fl000(tmp_path):
    result = _run(["check", "--stdin-filename", "m.py"], tmp_path, stdin=b"# coding: ascii\nx = '\xff'\n")
    assert result.exit_code == 1 and "m.py:1:1: FL000" in result.stdout


# ---------------------------------------------------------------- -q, -s, -v


def test_quiet_prints_the_findings_without_the_summary(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "-q", "--output-format", "concise", "m.py"], tmp_path)
    assert result.exit_code == 1
    assert result.stdout.startswith("m.py:7:9: FL103") and "Found" not in result.stdout
    (tmp_path / "m.py").write_text("import torch\n")
    clean = _run(["check", "--no-cache", "--quiet", "m.py"], tmp_path)
    assert clean.exit_code == 0 and clean.output == ""


def test_silent_prints_nothing_and_keeps_the_exit_code(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "-s", "m.py"], tmp_path)
    assert result.exit_code == 1 and result.output == ""


def test_verbose_names_the_settings_and_the_files_on_stderr(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint]\n")
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "--no-cache", "-v", "m.py"], tmp_path)
    assert "pyproject.toml" in result.stderr and "checked 1 file(s)" in result.stderr
    assert "checked" not in result.stdout


def test_quiet_and_verbose_together_are_a_usage_error(tmp_path):
    (tmp_path / "m.py").write_text(PRINTING)
    result = _run(["check", "-q", "-v", "m.py"], tmp_path)
    assert result.exit_code == 2 and "--quiet" in result.stderr


# ---------------------------------------------------------------- clean


def test_clean_removes_every_cache_under_the_folder_and_says_so(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "pyproject.toml").write_text("[tool.fuselint]\n")
        (tmp_path / sub / "m.py").write_text(PRINTING)
        _run(["check", "m.py"], tmp_path / sub)
        assert (tmp_path / sub / ".fuselint_cache").is_dir()
    result = _run(["clean"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "Removed a/.fuselint_cache (2 files)",
        "Removed b/.fuselint_cache (2 files)",
    ]
    assert not (tmp_path / "a" / ".fuselint_cache").exists() and (tmp_path / "a" / "m.py").exists()
    again = _run(["clean"], tmp_path)
    assert again.exit_code == 0 and again.stdout == "No .fuselint_cache found.\n"


def test_clean_of_a_missing_folder_is_a_usage_error(tmp_path):
    result = _run(["clean", "nope"], tmp_path)
    assert result.exit_code == 2 and "nope" in result.stderr


def test_stdin_name_of_an_unsaved_file_reads_the_settings_of_its_folder(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.fuselint]\nignore = ["FL103"]\n')
    result = _run(["check", "--stdin-filename", "pkg/new/unsaved.py"], tmp_path, stdin=PRINTING)
    assert result.exit_code == 0, result.output


def test_stdin_with_a_gate_or_baseline_is_a_usage_error(tmp_path):
    for extra in (["--fail-on-gain-launches", "1"], ["--baseline", "b.json"]):
        result = _run(["check", "--stdin-filename", "m.py", *extra], tmp_path, stdin=PRINTING)
        assert result.exit_code == 2 and "--stdin-filename cannot be used" in result.stderr


def test_add_noqa_runs_when_the_settings_file_asks_for_fixes(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint]\nfix = true\n")
    (tmp_path / "m.py").write_text(SILU)
    result = _run(["check", "--no-cache", "--add-noqa", "m.py"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "return x * torch.sigmoid(x)  # noqa: FL205" in (tmp_path / "m.py").read_text()


def test_silent_diff_prints_nothing_and_keeps_the_exit_code(tmp_path):
    (tmp_path / "m.py").write_text(STACK)
    result = _run(["check", "--no-cache", "--diff", "-s", "m.py"], tmp_path)
    assert result.exit_code == 1 and result.output == ""


def test_every_option_the_readme_usage_shows_exists():
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    usage = readme.split("## Usage", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    shown = 0
    for line in usage.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] != ["fuselint"]:
            continue
        command = main.commands[words[1]]
        known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        for word in words[2:]:
            for option in re.findall(r"(?:^|\|)(--?[a-z][a-z-]*)", word):
                assert option in known, f"README shows `fuselint {words[1]} {option}`, which does not exist"
                shown += 1
    assert shown >= 15  # the block was found and read
