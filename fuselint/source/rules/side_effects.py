"""FL103: printing, logging and warnings inside code that torch.compile traces.

dynamo cannot put a side effect on the host into a graph: it ends the graph before the
call, runs the call in Python, and starts a new graph after it (gb0059 for print,
gb0291 for Logger methods, gb0007 for warnings.warn), whatever the arguments are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.checks import check
from fuselint.source.module import SourceFile
from fuselint.source.scope import ModelFunction

_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "warning_once", "info_once"}
)
_LOGGER_NAMES = frozenset({"logger", "log", "logging", "_logger", "LOGGER"})


def _side_effect(call: ast.Call, sf: SourceFile) -> str | None:
    func = call.func
    qual = sf.imports.qualname(func)
    if isinstance(func, ast.Name) and func.id == "print" and "print" not in sf.imports.aliases:
        return "print()"
    if qual in ("warnings.warn", "logging.warning", "logging.info", "logging.debug", "logging.error"):
        return f"{qual}()"
    if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS:
        owner = func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name in _LOGGER_NAMES or name.endswith("logger"):
            return f"{sf.segment(func)}()"
    return None


@check("FL103")
def host_side_effects(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for fn in functions:
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Call) and (what := _side_effect(node, sf)):
                yield Finding(
                    code=rule.code,
                    message=f"{what} in `{fn.node.name}` ends the compiled graph: {rule.message}",
                    span=sf.span(node),
                    source_line=sf.line_text(node.lineno).strip(),
                )
