"""The fixture models: each shows its blockers, and fixtures/fixed holds what --fix --unsafe-fixes makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
CATALOG = load_catalog()
SOURCE_RULE_FIXTURES = {
    "moe_router.py": {"FL101", "FL102", "FL106", "FL107"},
    "detection_head.py": {"FL101", "FL106", "FL107"},
    "layerdrop_encoder.py": {"FL102"},
    "debug_prints.py": {"FL103", "FL218"},
    "early_exit.py": {"FL102"},
    "cache_copy.py": {"FL104", "FL105"},
    "mixed_precision.py": {"FL101", "FL215", "FL401"},
}


def _lint(path: str, text: str):
    return lint_text(path, text, CATALOG, Config())


@pytest.mark.parametrize("name", sorted(SOURCE_RULE_FIXTURES))
def test_fixture_shows_its_blockers(name):
    text = (ROOT / name).read_text()
    assert {f.code for f in _lint(name, text)} == SOURCE_RULE_FIXTURES[name]


@pytest.mark.parametrize("name", sorted(SOURCE_RULE_FIXTURES))
def test_fixed_fixture_is_what_fix_produces_and_fixing_again_changes_nothing(name):
    text = (ROOT / name).read_text()
    result = fix_text(text, lambda t: _lint(name, t), unsafe=True)
    assert result.text == (ROOT / "fixed" / name).read_text()
    again = fix_text(result.text, lambda t: _lint(name, t), unsafe=True)
    assert again.text == result.text


def test_look_alike_classes_stay_clean():
    text = (ROOT / "early_exit.py").read_text()
    start = text.index("class ShapeAwareBlock")
    first_line = text[:start].count("\n") + 1
    assert [f for f in _lint("early_exit.py", text) if f.span.line >= first_line] == []
