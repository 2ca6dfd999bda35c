"""The torch signature table is data: generated from torch's schemas, read without torch.

A function's spellings coincide through it (`torch.cumsum(x, 1)`, `torch.cumsum(x, dim=1)`,
`x.cumsum(1)`), so a user's rule written in one spelling matches them all, and a new spelling
of a function is a line of `spellings.toml`, never code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuselint.catalog import Rule, load_catalog
from fuselint.config import Config
from fuselint.source.lint import lint_text
from fuselint.source.patterns_canon import ALIASES, METHODS, PARAMS, REQUIRED

ROOT = Path(__file__).resolve().parents[2]
CUMSUM = Rule(
    "XL002",
    "cumsum-last",
    "pattern",
    "s",
    "running sum",
    "w",
    "u",
    pattern={"match": "torch.cumsum($x, dim=-1)", "replace": "torch.cumsum($x, -1)"},
    bad=(),
)


def _matches(rule: Rule, expression: str) -> bool:
    catalog = load_catalog()
    catalog.rules[rule.code] = rule
    try:
        source = f"import torch\n\ndef f(x):\n    return {expression}\n"
        return [f.code for f in lint_text("m.py", source, catalog, Config(select=(rule.code,)))] == [
            rule.code
        ]
    finally:
        del catalog.rules[rule.code]


@pytest.mark.parametrize(
    "spelling",
    [
        "torch.cumsum(x, dim=-1)",
        "torch.cumsum(x, -1)",
        "x.cumsum(-1)",
        "x.cumsum(dim=-1)",
        "torch.cumsum(x, -1, dtype=None)",
    ],
)
def test_every_spelling_of_a_generated_signature_matches(spelling):
    assert _matches(CUMSUM, spelling)


@pytest.mark.parametrize(
    "other", ["torch.cumsum(x, 0)", "torch.cumsum(x, -1, dtype=torch.float64)", "torch.cumprod(x, -1)"]
)
def test_other_calls_do_not_match(other):
    assert not _matches(CUMSUM, other)


def test_generated_signatures_carry_defaults_and_keyword_only_parameters():
    assert PARAMS["torch.cumsum"] == (("input", REQUIRED), ("dim", REQUIRED), ("dtype", None))
    assert ALIASES["torch.cumsum"] == ("torch.cumsum", ("input", "dim"))  # dtype is keyword-only
    assert METHODS["cumsum"] == "torch.cumsum"


def test_hand_written_spellings_point_to_one_function():
    assert ALIASES["torch.special.expit"][0] == "torch.sigmoid"
    assert ALIASES["torch.nn.functional.softmax"] == (
        "torch.softmax",
        ("input", "dim", "_stacklevel", "dtype"),
    )
    # overloads the generated table could not merge get their signature by hand
    assert PARAMS["torch.sum"][1] == ("dim", None)


def test_the_table_is_read_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from fuselint.source.patterns_canon import PARAMS\n"
        "assert 'torch.cumsum' in PARAMS\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_shipped_table_matches_the_installed_torch():
    torch = pytest.importorskip("torch")
    import json

    shipped = json.loads((ROOT / "fuselint" / "source" / "torch_signatures.json").read_text())
    if torch.__version__.split("+")[0] != shipped["torch"]:
        pytest.skip(f"the table was generated with torch {shipped['torch']}, not {torch.__version__}")
    result = subprocess.run(
        [sys.executable, "scripts/gen_signatures.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
