"""FL108: constructs dynamo does not trace, whatever the values: a graph break no other rule names.

Checked against dynamo (torch 2.13): `with torch.device(...)` in a compiled function sends the
whole frame to eager (no graph); `torch.Generator(...)` ends the graph (gb0055); a call to a
function of the same file decorated `@torch.compiler.disable` ends the graph at the call.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.checks import check
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import flows
from fuselint.source.imports import ImportTable
from fuselint.source.module import SourceFile
from fuselint.source.scope import ModelFunction

_DISABLE = ("torch.compiler.disable", "torch._dynamo.disable")


def _disabled(tree: ast.Module, imports: ImportTable) -> set[tuple[str | None, str]]:
    """(class or None, name) of the file's functions and methods decorated with
    torch.compiler.disable (with or without arguments)."""
    found = set()
    scopes: list[tuple[str | None, list[ast.stmt]]] = [(None, tree.body)]
    scopes += [(n.name, n.body) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for owner, body in scopes:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in stmt.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if imports.qualname(target) in _DISABLE:
                        found.add((owner, stmt.name))
    return found


def _callee(func: ast.expr, cls: ast.ClassDef | None) -> tuple[str | None, str] | None:
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return (cls.name if cls is not None else None), func.attr
    return None


@check("FL108")
def untraceable_construct(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    disabled = _disabled(sf.tree, sf.imports)
    for flow in flows(functions, sf.imports):
        for site in flow.of(ast.With, ast.AsyncWith):
            for item in site.node.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and sf.imports.qualname(expr.func) == "torch.device":
                    message = (
                        "`with torch.device(...)` in compiled code: the whole frame runs in eager; "
                        "pass `device=` to the factory calls instead"
                    )
                    yield finding(sf, rule, expr, message, path=site.path)
        for site in flow.of(ast.Call):
            func = site.node.func
            qual = sf.imports.qualname(func)
            if qual == "torch.Generator":
                message = f"`torch.Generator(...)` in compiled code: {rule.message} (gb0055)"
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual is None and _callee(func, flow.fn.cls) in disabled:
                name = _callee(func, flow.fn.cls)[1]
                message = f"`{name}` is marked torch.compiler.disable: {rule.message} at the call"
                yield finding(sf, rule, site.node, message, path=site.path)
