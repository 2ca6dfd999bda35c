"""Fixes a reviewer accepts: every match fixed, counts that agree, comments kept safe,
the file's own style (quotes, line length, imports, blank lines) followed.

Each test lints a small source through the real catalog and checks what `--fix` writes.
"""

from __future__ import annotations

import textwrap

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text

CATALOG = load_catalog()


def _lint(text: str, select: str = "FL2") -> list:
    return lint_text("model.py", text, CATALOG, Config(select=(select,)))


def _fix(source: str, select: str = "FL2", unsafe: bool = True, **style):
    text = textwrap.dedent(source)
    return fix_text(text, lambda t: _lint(t, select), unsafe=unsafe, **style)


DPM_STEP = """\
import torch


def step(alpha_t, alpha_s, sample, sigma_t, h, model_output, noise):
    x_t = (
        (alpha_t / alpha_s) * sample
        - 2.0 * (sigma_t * (torch.exp(h) - 1.0)) * model_output
        + sigma_t * torch.sqrt(torch.exp(2 * h) - 1.0) * noise
    )
    return x_t
"""


def test_every_match_in_a_statement_is_found():
    # The first match sits under `a - b`, whose `-1 * b` has no node of its own.
    lines = sorted(f.span.line for f in _lint(DPM_STEP))
    assert lines == [7, 8]


def test_after_the_fix_nothing_fixable_is_left():
    result = _fix(DPM_STEP)
    assert "torch.exp(" not in result.text
    assert "- 2.0 * (sigma_t * torch.expm1(h)) * model_output" in result.text
    assert [f for f in _lint(result.text) if f.fix is not None] == []


def test_an_operand_match_rewrites_only_the_operand():
    result = _fix(
        """\
        import torch


        def g(sigma_t, h, out):
            return 2.0 * (sigma_t * (torch.exp(h) - 1.0)) * out + (torch.exp(h * 2) - 1.0)
        """
    )
    assert "return 2.0 * (sigma_t * torch.expm1(h)) * out + torch.expm1(h * 2)\n" in result.text


def test_call_parentheses_are_not_taken_for_grouping():
    result = _fix(
        """\
        import torch


        def g(h):
            return torch.sqrt(torch.exp(h) - 1.0) + torch.sqrt((torch.exp(h) - 1))
        """
    )
    assert "return torch.sqrt(torch.expm1(h)) + torch.sqrt(torch.expm1(h))\n" in result.text


def test_fixed_counts_the_reported_findings_not_the_rounds():
    # The inner `exp(x) - 1` is inside the outer match: reported once, fixed in two rounds.
    source = """\
    import torch


    def g(x):
        return torch.exp(torch.exp(x) - 1) - 1
    """
    assert len(_lint(textwrap.dedent(source))) == 1
    result = _fix(source)
    assert result.text.endswith("return torch.expm1(torch.expm1(x))\n")
    assert len(result.applied) == 2
    assert result.fixed == 1


def test_cli_fixed_count_agrees_with_found(tmp_path):
    from click.testing import CliRunner

    from fuselint.cli import main

    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef g(x):\n    return torch.exp(torch.exp(x) - 1) - 1\n")
    runner = CliRunner()
    found = runner.invoke(main, ["check", "--no-cache", str(path)])
    assert "Found 1 error." in found.output
    fixed = runner.invoke(main, ["check", "--no-cache", "--fix", "--unsafe-fixes", str(path)])
    assert "Fixed 1 error." in fixed.output, fixed.output


# FL220 (cat of unsqueezed tensors -> stack) is a safe fix: bit-equal for every input. Its fix
# consumes the named temporary, and with it the temporary's comment.
NAMED_TEMPORARY = """\
import torch


def pair(a, b):
    ua = a.unsqueeze(1)  # keep the batch dim first
    return torch.cat([ua, b.unsqueeze(1)], dim=1)
"""


def test_a_fix_that_deletes_a_comment_is_unsafe():
    (finding,) = [f for f in _lint(NAMED_TEMPORARY) if f.fix is not None]
    assert finding.code == "FL220"
    assert finding.fix.applicability.value == "unsafe"
    assert _fix(NAMED_TEMPORARY, unsafe=False).text == NAMED_TEMPORARY
    assert "torch.stack([a, b], 1)" in _fix(NAMED_TEMPORARY, unsafe=True).text


def test_a_fix_that_keeps_every_comment_stays_safe():
    source = NAMED_TEMPORARY.replace("  # keep the batch dim first", "").replace(
        "    return", "    # keep the batch dim first\n    return"
    )
    (finding,) = [f for f in _lint(source) if f.fix is not None]
    assert finding.fix.applicability.value == "safe"
    assert "# keep the batch dim first\n" in _fix(source, unsafe=False).text


def test_a_deleted_statement_between_blank_lines_leaves_one_blank_run():
    source = """\
    import torch


    def gaussian(x, sigma):
        x = x + 0.5

        gauss = torch.exp(-x.pow(2.0) / (2 * sigma.pow(2.0)))

        return gauss / gauss.sum(-1, keepdim=True)
    """
    text = _fix(source, "FL201").text
    assert "x = x + 0.5\n\n    return torch.softmax(" in text


def test_a_deleted_first_statement_of_a_block_leaves_no_leading_blank_line():
    source = """\
    import torch


    def gaussian(x, flag):
        if flag:
            gauss = torch.exp(x)

            return gauss / gauss.sum(-1, keepdim=True)
        return x
    """
    text = _fix(source, "FL201").text
    assert "    if flag:\n        return torch.softmax(x, -1)\n" in text


GELU_FILE = """\
import math

import torch
from torch import nn

from .attention import Attention


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def ones():
    return torch.ones(1)
"""


def test_an_import_the_fix_made_unused_is_removed():
    text = _fix(GELU_FILE, "FL204").text
    assert "import math" not in text
    assert text.startswith("import torch\nfrom torch import nn\n\nfrom .attention import Attention\n")


def test_an_import_unused_before_the_fix_is_kept():
    source = GELU_FILE.replace("import math\n", "import math\nimport os\n")
    text = _fix(source, "FL204").text
    assert "import os\n" in text and "import math" not in text


def test_an_import_with_a_comment_is_kept():
    source = GELU_FILE.replace("import math\n", "import math  # for sqrt(2 / pi)\n")
    assert "import math  # for sqrt(2 / pi)\n" in _fix(source, "FL204").text


def test_a_new_import_goes_in_the_third_party_section_before_the_local_one():
    source = """\
    import math

    import numpy as np
    import torch
    from transformers import AutoModel

    from ...utils import logging
    from .output import Output


    def norm(states):
        return states * torch.rsqrt(states.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


    def ones():
        return torch.ones(1)
    """
    text = _fix(source).text
    assert text.startswith(
        "import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
        "from transformers import AutoModel\n\nfrom ...utils import logging\n"
    )


def test_a_new_third_party_section_opens_after_the_standard_library():
    from fuselint.source.fixer import add_imports

    source = "import math\nfrom typing import Any\n\nfrom .utils import x\n\ny = 1\n"
    assert add_imports(source, ["import torch"]) == (
        "import math\nfrom typing import Any\n\nimport torch\n\nfrom .utils import x\n\ny = 1\n"
    )


def test_a_replacement_uses_the_file_s_double_quotes():
    text = _fix(GELU_FILE, "FL204").text
    assert 'nn.functional.gelu(x, approximate="tanh")' in text


def test_a_replacement_uses_the_file_s_single_quotes():
    source = GELU_FILE.replace("def ones():", "NAME = 'gelu'\nMODE = 'tanh'\n\n\ndef ones():")
    text = _fix(source, "FL204").text
    assert "nn.functional.gelu(x, approximate='tanh')" in text


def test_requote_leaves_strings_with_quotes_or_escapes_alone():
    from fuselint.source.edits import requote

    before = "f(a='x', b='it\\'s', c=\"y\", d='say \"hi\"')"
    after = 'f(a="x", b=\'it\\\'s\', c="y", d=\'say "hi"\')'
    assert requote(before, '"') == after


# ---------------------------------------------------------------- line length

RMS_LONG = """\
import torch
from torch import nn


class T5LayerNorm(nn.Module):
    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return hidden_states
"""


def test_a_line_the_fix_makes_too_long_is_wrapped_inside_the_call():
    text = _fix(RMS_LONG, "FL215", line_length=100).text
    assert (
        "        hidden_states = nn.functional.rms_norm(\n"
        "            hidden_states.float(), (hidden_states.shape[-1],), eps=self.variance_epsilon\n"
        "        )\n"
    ) in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_line_within_the_limit_is_left_on_one_line():
    text = _fix(RMS_LONG, "FL215", line_length=130).text
    assert (
        "hidden_states = nn.functional.rms_norm(hidden_states.float(), (hidden_states.shape[-1],), eps="
        in text
    )


def test_arguments_go_one_per_line_when_they_do_not_fit_together():
    source = """\
    import torch
    from torch import nn


    class Rope(nn.Module):
        def forward(self, hidden_states, position_ids):
            seq_len = torch.max(position_ids) + 1
            if seq_len > self.limit:
                ext_factors = torch.tensor(self.long_factor, dtype=torch.float32, device=hidden_states.device)
            else:
                ext_factors = torch.tensor(self.short_factor, dtype=torch.float32, device=hidden_states.device)
            return ext_factors
    """
    text = _fix(source, "FL102", line_length=100).text
    assert (
        "        ext_factors = torch.where(\n"
        "            seq_len > self.limit,\n"
        "            torch.tensor(self.long_factor, dtype=torch.float32, device=hidden_states.device),\n"
        "            torch.tensor(self.short_factor, dtype=torch.float32, device=hidden_states.device),\n"
        "        )\n"
    ) in text


def test_a_method_on_a_parenthesised_product_splits_at_the_parentheses():
    from fuselint.source.wrap import wrap

    line = (
        "        return (nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=self.eps)"
        " * self.weight.float()).to(input_dtype)"
    )
    assert wrap(line, 119, statement=True) == [
        "        return (",
        "            nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=self.eps)"
        " * self.weight.float()",
        "        ).to(input_dtype)",
    ]


def test_an_operand_line_inside_brackets_splits_before_its_operators():
    from fuselint.source.wrap import wrap

    line = "        - 2.0 * (sigma_t * torch.expm1(h)) * model_output_with_a_rather_long_name_for_this_test"
    assert wrap(line, 60, statement=False) == [
        "        - 2.0",
        "        * (sigma_t * torch.expm1(h))",
        "        * model_output_with_a_rather_long_name_for_this_test",
    ]


def test_a_trailing_comment_follows_the_last_line():
    from fuselint.source.wrap import wrap

    line = (
        "        return (F.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=self.variance_epsilon)"
        " * self.weight).to(input_dtype)  # main diff with Llama"
    )
    assert wrap(line, 119, statement=True) == [
        "        return (F.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=self.variance_epsilon)"
        " * self.weight).to(",
        "            input_dtype",
        "        )  # main diff with Llama",
    ]


def test_line_length_comes_from_the_nearest_pyproject(tmp_path):
    from fuselint.source.fixer import line_length_for

    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 119\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    (tmp_path / "pkg" / "m.py").write_text("")
    (tmp_path / "n.py").write_text("")
    assert line_length_for(tmp_path / "pkg" / "m.py") == 100
    assert line_length_for(tmp_path / "n.py") == 119
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert line_length_for(tmp_path / "n.py") == 88


def test_the_cli_wraps_to_the_project_line_length(tmp_path):
    from click.testing import CliRunner

    from fuselint.cli import main

    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    path = tmp_path / "m.py"
    path.write_text(RMS_LONG)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--fix", "--unsafe-fixes", str(path)])
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in path.read_text().splitlines()) <= 100


def test_an_argument_ending_in_its_trailing_comma_wraps_without_recursing():
    """diffusers' OmniGen rope: the torch.where fix's third argument, `torch.tensor(...),`, is one
    piece at its own trailing comma; splitting there again and again recursed without end."""
    from fuselint.source.wrap import wrap

    line = (
        "        ext_factors = torch.where(seq_len > self.original_max_position_embeddings, "
        "torch.tensor(self.long_factor, dtype=torch.float32, device=hidden_states.device), "
        "torch.tensor(self.short_factor, dtype=torch.float32, device=hidden_states.device))"
    )
    assert wrap(line, 88, statement=True) == [  # as ruff-format writes it
        "        ext_factors = torch.where(",
        "            seq_len > self.original_max_position_embeddings,",
        "            torch.tensor(",
        "                self.long_factor, dtype=torch.float32, device=hidden_states.device",
        "            ),",
        "            torch.tensor(",
        "                self.short_factor, dtype=torch.float32, device=hidden_states.device",
        "            ),",
        "        )",
    ]


def test_an_unsafe_pattern_fix_states_its_assumption_in_its_message():
    (finding,) = _lint("import torch\n\n\ndef f(x):\n    return torch.exp(x) - 1\n")
    assert finding.code == "FL210" and finding.fix.applicability.value == "unsafe"
    assert finding.fix.message == (
        "replace with `torch.expm1(x)` (unsafe: the result is more exact than the hand-written "
        "form's near zero, so it differs)"
    )
