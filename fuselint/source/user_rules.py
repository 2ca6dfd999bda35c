"""Users' own rules (`extra-rules`): refuse, before a check runs, what would never run.

A rule file that loads but can never fire is worse than an error: CI passes and the user
believes their rule guards the code. So `check` stops with one line naming the file when a
user rule's code is not selected, or when its pattern cannot be compiled or can never match.
"""

from __future__ import annotations

from fuselint.catalog import Catalog, CatalogError
from fuselint.config import Config


def check_user_rules(catalog: Catalog, config: Config) -> None:
    """Raise CatalogError for the first user rule that would never run."""
    for rule in catalog:
        if not rule.user:
            continue
        if not config.selects(rule.code):
            chosen = ", ".join(repr(s) for s in config.select)
            raise CatalogError(
                f"{rule.path}: rule {rule.code} is never run: select = [{chosen}] does not include it; "
                f"add {rule.code!r} (or a prefix of it) to `select` or `extend-select`"
            )
        if rule.kind == "pattern":
            from fuselint.source.patterns import PatternError, compile_rule

            try:
                compile_rule(rule)
            except PatternError as exc:
                raise CatalogError(f"{rule.path}: {exc}") from None
