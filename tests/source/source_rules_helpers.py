"""Shared helper for the source-rule tests: lint a snippet, get (code, line) pairs."""

from __future__ import annotations

import textwrap

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Finding
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text

CATALOG = load_catalog()


def findings(source: str, select: str = "FL") -> list[Finding]:
    return lint_text("snippet.py", textwrap.dedent(source), CATALOG, Config(select=(select,)))


def lines(source: str, code: str) -> list[int]:
    """The lines flagged with `code`, in order."""
    return [f.span.line for f in findings(source, code) if f.code == code]


def fixed(source: str, code: str, unsafe: bool = True) -> str:
    config = Config(select=(code,))
    return fix_text(
        textwrap.dedent(source), lambda t: lint_text("snippet.py", t, CATALOG, config), unsafe=unsafe
    ).text
