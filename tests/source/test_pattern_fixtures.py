"""The hand-written model fixtures: `--fix --unsafe-fixes` gives the checked-in fixed files,
a second run changes nothing, and the fixed models compute what the originals computed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures").glob("handwritten_*.py"))
CATALOG = load_catalog()
CONFIG = Config()


def _fix(path: Path, text: str) -> str:
    return fix_text(text, lambda t: lint_text(str(path), t, CATALOG, CONFIG), unsafe=True).text


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fix_gives_the_checked_in_fixed_file(path):
    fixed = _fix(path, path.read_text())
    assert fixed == (path.parent / "fixed" / path.name).read_text()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixed_file_has_nothing_left_to_fix(path):
    fixed_path = path.parent / "fixed" / path.name
    text = fixed_path.read_text()
    assert _fix(fixed_path, text) == text
    assert not [f for f in lint_text(str(fixed_path), text, CATALOG, CONFIG) if f.fix is not None]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixed_model_computes_the_same_outputs(path):
    torch = pytest.importorskip("torch")
    original = _load(path, f"original_{path.stem}")
    fixed = _load(path.parent / "fixed" / path.name, f"fixed_{path.stem}")
    model_a, args_a = original.entry()
    model_b, args_b = fixed.entry()
    model_b.load_state_dict(model_a.state_dict())
    with torch.no_grad():
        want, got = model_a(*args_a), model_b(*args_b)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-9 if want.dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_fixtures_are_full_of_findings():
    for path in FIXTURES:
        codes = {f.code for f in lint_text(str(path), path.read_text(), CATALOG, CONFIG)}
        assert len(codes) >= 4, (path.name, codes)
