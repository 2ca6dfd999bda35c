"""A new op spelling, a new op kind and a new pattern rule are each a change to data only.

Each test copies the package, edits one data file of the copy (never code), and runs the copy
in a fresh interpreter to see the change take effect, next to the unchanged copy as control.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _package(tmp_path: Path) -> Path:
    """A copy of fuselint and the rule catalog under tmp_path, importable from there."""
    shutil.copytree(ROOT / "fuselint", tmp_path / "fuselint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", tmp_path / "rules")
    return tmp_path


def _python(root: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _append(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


LINT = """
from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import lint_text
import fuselint
assert fuselint.__file__.startswith({root!r}), fuselint.__file__
source = "import torch.nn.functional as F\\n\\ndef act(x):\\n    return x * F.logistic(x)\\n"
print([f.code for f in lint_text("m.py", source, load_catalog(), Config(select=("FL205",)))])
"""


def test_a_new_spelling_is_a_line_in_spellings_toml(tmp_path):
    root = _package(tmp_path)
    code = LINT.format(root=str(root))
    assert _python(root, code) == "[]"
    _append(
        root / "fuselint" / "source" / "spellings.toml",
        '[functions."torch.sigmoid"]\nspellings = [',
        '[functions."torch.sigmoid"]\nspellings = ["torch.nn.functional.logistic", ',
    )
    assert _python(root, code) == "['FL205']"  # x * F.logistic(x) is FL205's x * sigmoid(x)


KIND = """
import torch
import fuselint
from fuselint.graph.fusion_graph import op_kind
assert fuselint.__file__.startswith({root!r}), fuselint.__file__
graph = torch.fx.Graph()
x = graph.placeholder("x")
print(op_kind(graph.call_function(torch.ops.aten.rot90.default, (x,))))
"""


def test_a_new_op_kind_is_a_line_in_op_facts_toml(tmp_path):
    pytest.importorskip("torch")
    root = _package(tmp_path)
    code = KIND.format(root=str(root))
    assert _python(root, code) == "other"
    _append(root / "fuselint" / "graph" / "op_facts.toml", "injective = [\n", 'injective = [\n    "rot90",\n')
    assert _python(root, code) == "injective"


RULE = """
import fuselint
from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import lint_text
assert fuselint.__file__.startswith({root!r}), fuselint.__file__
source = "import torch\\n\\ndef f(x):\\n    return torch.cumsum(x, -1)[..., -1]\\n"
print([f.code for f in lint_text("m.py", source, load_catalog(), Config(select=("FL",)))])
"""

CUMSUM_LAST = '''
code = "FL299"
name = "cumsum-for-sum"
kind = "pattern"
summary = "The last element of a cumulative sum is the sum."
message = "`cumsum(x, -1)[..., -1]`: use `x.sum(-1)`"
why = "A scan writes every prefix to memory to read one of them."
use_instead = "`x.sum(-1)`."
bad = ["""
import torch

def f(x):
    return x.cumsum(-1)[..., -1]
"""]
good = ["""
import torch

def f(x):
    return x.sum(-1)
"""]

[pattern]
match = "torch.cumsum($x, dim=-1)[..., -1]"
replace = "$x.sum(-1)"
'''


def test_a_new_pattern_rule_is_a_file_in_rules(tmp_path):
    root = _package(tmp_path)
    code = RULE.format(root=str(root))
    assert _python(root, code) == "[]"
    (root / "rules" / "FL299.toml").write_text(CUMSUM_LAST, encoding="utf-8")
    assert _python(root, code) == "['FL299']"
