"""Shared helpers for the trace room's tests: fixture entries and line lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trace"


def _entry(name: str, factory: str = "entry") -> str:
    return f"{FIXTURES / name}:{factory}"


def _line_of(name: str, text: str) -> int:
    for number, line in enumerate((FIXTURES / name).read_text().splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {name}")


@pytest.fixture(scope="session")
def trace_fixtures() -> Path:
    """The folder of fixtures/trace models."""
    return FIXTURES


@pytest.fixture(scope="session")
def fixture_entry():
    """fixture_entry("item_branch.py") -> "/abs/fixtures/trace/item_branch.py:entry"."""
    return _entry


@pytest.fixture(scope="session")
def line_of():
    """line_of(fixture, text): the 1-based line of the first line containing text."""
    return _line_of


@pytest.fixture(scope="session")
def captured():
    """Capture each (fixture, device, train) once per session: captures cost ~0.1-1 s each."""
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry

    cache: dict[tuple, object] = {}

    def get(name: str, *, device: str | None = None, train: bool = False, factory: str = "entry"):
        key = (name, device, train, factory)
        if key not in cache:
            cache[key] = capture(load_entry(_entry(name, factory)), device=device, train=train)
        return cache[key]

    return get
