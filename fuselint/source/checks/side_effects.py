"""FL103: printing, logging and warnings inside code that torch.compile traces.

dynamo cannot put a side effect on the host into a graph: it ends the graph before the
call, runs the call in Python, and starts a new graph after it (gb0059 for print,
gb0291 for Logger methods, gb0007 for warnings.warn), whatever the arguments are.
Calls that dynamo never traces (under `if not torch.compiler.is_compiling():`) are fine.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.break_fixes import guard_side_effect
from fuselint.source.checks import check
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import flows
from fuselint.source.module import SourceFile
from fuselint.source.scope import ModelFunction

_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "warning_once", "info_once"}
)
_LOGGER_NAMES = frozenset({"logger", "log", "logging", "_logger", "LOGGER", "_LOGGER", "_log"})
_LOGGING_FUNCTIONS = frozenset(
    {"warnings.warn", "warnings.warn_explicit", "logging.warning", "logging.warn", "logging.info",
     "logging.debug", "logging.error", "logging.critical", "logging.exception", "logging.log"}
)  # fmt: skip


def _is_logger(owner: ast.expr, sf: SourceFile) -> bool:
    if isinstance(owner, ast.Call):  # logging.getLogger(__name__).warning(...)
        qual = sf.imports.qualname(owner.func) or ""
        name = owner.func.attr if isinstance(owner.func, ast.Attribute) else getattr(owner.func, "id", "")
        return qual in ("logging.getLogger", "logging.get_logger") or name in ("getLogger", "get_logger")
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    return name in _LOGGER_NAMES or name.lower().endswith("logger")


def _side_effect(call: ast.Call, sf: SourceFile) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "print" and "print" not in sf.imports.aliases:
        return "print()"
    qual = sf.imports.qualname(func)
    if qual in _LOGGING_FUNCTIONS:
        return f"{qual}()"
    if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS and _is_logger(func.value, sf):
        return f"{sf.segment(func)}()"
    return None


@check("FL103")
def host_side_effects(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        fn = flow.fn
        for site in flow.of(ast.Call):
            what = _side_effect(site.node, sf)
            if what:
                message = f"{what} in `{fn.node.name}` ends the compiled graph: {rule.message}"
                yield finding(sf, rule, site.node, message, guard_side_effect(sf, site), path=site.path)
