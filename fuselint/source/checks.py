"""The registry of source checks: each `source` rule's code mapped to the function that finds it.

A check receives the parsed file and its in-scope model functions and yields Findings;
it is registered with `@check("FL103")` in a module under `fuselint/source/rules/`.
Pattern rules need no entry here: one engine (`fuselint.source.patterns`) runs them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.module import SourceFile
from fuselint.source.scope import ModelFunction

Check = Callable[[SourceFile, list[ModelFunction], Rule], Iterable[Finding]]
CHECKS: dict[str, Check] = {}


def check(code: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        if code in CHECKS:
            raise ValueError(f"two checks registered for {code}")
        CHECKS[code] = fn
        return fn

    return register


def load_checks() -> dict[str, Check]:
    """Import every rule module so that its checks register themselves."""
    import importlib
    import pkgutil

    from fuselint.source import rules

    for info in pkgutil.iter_modules(rules.__path__):
        importlib.import_module(f"{rules.__name__}.{info.name}")
    return CHECKS
