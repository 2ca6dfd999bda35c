"""`extend-safe-fixes` / `extend-unsafe-fixes` in [tool.fuselint], as ruff's settings of those names:
a project that accepts a composite's rounding takes its fix with `--fix`, without every unsafe fix."""

from __future__ import annotations

from cli_runner import run as _run

from fuselint.config import Config

# FL205 (x * sigmoid(x) -> F.silu, unsafe: rounding) and FL103 (print in forward, unsafe fix).
MODEL = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print(x.shape)
        return torch.cat([x.unsqueeze(0), (x * torch.sigmoid(x)).unsqueeze(0)])
"""


def _fixed(tmp_path, settings: str) -> str:
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint]\n" + settings)
    (tmp_path / "m.py").write_text(MODEL)
    _run(["check", "--no-cache", "--fix", "m.py"], tmp_path)
    return (tmp_path / "m.py").read_text()


def test_plain_fix_applies_only_the_bit_equal_fix(tmp_path):
    text = _fixed(tmp_path, "")
    assert "torch.stack(" in text and "torch.sigmoid(x)" in text and "is_compiling" not in text


def test_extend_safe_fixes_applies_that_rules_unsafe_fix_and_no_other(tmp_path):
    text = _fixed(tmp_path, 'extend-safe-fixes = ["FL2"]\n')
    assert "silu(x)" in text and "torch.stack(" in text
    assert "is_compiling" not in text  # FL103's unsafe fix still needs --unsafe-fixes


def test_extend_unsafe_fixes_holds_back_a_safe_fix_and_wins_over_safe(tmp_path):
    text = _fixed(tmp_path, 'extend-unsafe-fixes = ["FL220"]\n')
    assert "torch.cat(" in text and "torch.stack(" not in text
    both = _fixed(tmp_path, 'extend-safe-fixes = ["FL2"]\nextend-unsafe-fixes = ["FL205"]\n')
    assert "silu(x)" not in both and "torch.stack(" in both


def test_an_unknown_code_in_the_settings_is_a_usage_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fuselint]\nextend-safe-fixes = ["FL2O5"]\n')
    (tmp_path / "m.py").write_text(MODEL)
    result = _run(["check", "--no-cache", "m.py"], tmp_path)
    assert result.exit_code == 2 and "FL2O5" in result.stderr


def test_fix_safety_reads_codes_prefixes_and_all():
    config = Config(extend_safe_fixes=("FL2",), extend_unsafe_fixes=("FL220",))
    assert config.fix_safety("FL205", safe=False) and not config.fix_safety("FL220", safe=True)
    assert not config.fix_safety("FL103", safe=False) and config.fix_safety("FL001", safe=True)
    assert Config(extend_safe_fixes=("ALL",)).fix_safety("FL103", safe=False)
