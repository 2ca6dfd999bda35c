"""Class decorators that swap a method away for an implementation an option picks.

transformers 5.x decorates its mixture-of-experts classes with `@use_experts_implementation`: the
class's `forward` (a python loop over the experts that are hit) is replaced by one that looks up
`config._experts_implementation` and runs a grouped-mm or batched kernel in its place; the class's
own body runs only for a user who loads the model with `experts_implementation="eager"`. A break in
that body is real, but it sits on the road of that option (`paths.option_road`), not the normal one,
and `--paths normal` leaves it out.

Which decorators do this is data (`dispatchers.toml`): their qualified names, the methods they
swap, the option that keeps them, and what a file must (a model class) and must not (a method that
chooses the implementation itself) define for the option to be the model's. A decorator counts only
where the file's imports resolve it to one of those names (a relative import, a re-export, an alias
or a module attribute); a function of the same name defined elsewhere does not.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fuselint.source.imports import iter_statements

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project supports 3.10 through tomli
    import tomli as tomllib

_DATA = Path(__file__).resolve().parent / "dispatchers.toml"


@dataclass(frozen=True)
class Dispatcher:
    """One decorator of `dispatchers.toml`."""

    names: frozenset[str]  # its qualified names (defined, re-exported)
    swaps: frozenset[str]  # the methods it replaces
    kept_by: str  # the option under which the replaced method still runs
    model_base: str  # the file defines a class with a base whose name ends so
    overrides: frozenset[str]  # methods that pick the implementation themselves

    @property
    def short_names(self) -> frozenset[str]:
        return frozenset(name.rsplit(".", 1)[-1] for name in self.names)


@cache
def dispatchers() -> tuple[Dispatcher, ...]:
    """The decorators of `dispatchers.toml`."""
    data = tomllib.loads(_DATA.read_text(encoding="utf-8"))
    return tuple(
        Dispatcher(
            frozenset(entry["decorator"]),
            frozenset(entry["swaps"]),
            entry["kept_by"],
            entry["model_base"],
            frozenset(entry.get("overrides", ())),
        )
        for entry in data["dispatcher"]
    )


def _tail(expr: ast.expr) -> str:
    return expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", "")


def swapped_methods(
    tree: ast.Module, qualify: Callable[[ast.expr], str | None], text: str | None = None
) -> dict[tuple[str, str], str]:
    """The methods of the file's classes that a dispatcher swaps away: (class, method) -> the option
    under which the method's own body runs. `qualify` resolves a decorator to its qualified name
    through the file's imports; `text`, the file's source, lets a file that never names a dispatcher
    skip the walk."""
    known = dispatchers()
    if text is not None:
        known = tuple(d for d in known if any(name in text for name in d.short_names))
    if not known:
        return {}
    classes = [n for n in iter_statements(tree) if isinstance(n, ast.ClassDef)]
    found: dict[tuple[str, str], str] = {}
    for dispatcher in known:
        decorated = [
            cls
            for cls in classes
            if any(
                qualify(d.func if isinstance(d, ast.Call) else d) in dispatcher.names
                for d in cls.decorator_list
            )
        ]
        if not decorated or not _option_holds(classes, dispatcher):
            continue
        for cls in decorated:
            for stmt in cls.body:
                if (
                    isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and stmt.name in dispatcher.swaps
                ):
                    found.setdefault((cls.name, stmt.name), dispatcher.kept_by)
    return found


def _option_holds(classes: list[ast.ClassDef], dispatcher: Dispatcher) -> bool:
    """The file defines the model the option is set on, and no method of its that picks the
    implementation itself (transformers' openai_privacy_filter defaults to the swapped-away one)."""
    if not any(_tail(base).endswith(dispatcher.model_base) for cls in classes for base in cls.bases):
        return False
    return not any(
        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in dispatcher.overrides
        for cls in classes
        for stmt in cls.body
    )
