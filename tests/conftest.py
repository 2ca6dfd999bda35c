"""Shared test set-up: paths to the repository's rules and fixtures."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fixtures_dir() -> Path:
    return ROOT / "fixtures"
