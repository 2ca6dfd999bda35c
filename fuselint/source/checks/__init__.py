"""The registry of source checks: each `source` rule's code mapped to the function that finds it.

A check receives the parsed file and its in-scope model functions and yields Findings;
it is registered with `@check("FL103")` in a module of this package, one module per family
of rules (`control_flow`, `host_sync`, ...); `_shared` holds what they share.
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
    """Import every check module of this package so that its checks register themselves."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    return CHECKS
