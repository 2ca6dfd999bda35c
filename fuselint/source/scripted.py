"""Code that TorchScript compiles: no fix is written there.

A fix writes Python that dynamo traces and TorchScript does not know: `guard_or_false` (its
parameter is annotated `BoolLikeType`, a type TorchScript cannot resolve), `torch.sym_max`, a
custom op defined in the fixed file, `torch.compiler.is_compiling()`. torch_geometric 2.8.1
scripts its `ConnectOutput` class at import (`ConnectOutput = torch.jit.script(ConnectOutput)`
after the class): a guard fix in its `__init__` made `import torch_geometric` raise, and every
torch_geometric model of the fix-rate corpus failed to trace (bench/results, session 23). The
finding stays; its fix is dropped.

Scripted here: a def or class decorated with `torch.jit.script` (or `script_method`,
`interface`), and a module-level def or class whose name a `torch.jit.script(...)` call of the
module names (`C = torch.jit.script(C)`, `torch.jit.script(f)`); a class's methods with it. Code
the user scripts from another file is not known here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace

from fuselint.findings import Finding
from fuselint.source.imports import ImportTable
from fuselint.source.nodes import walk

_SCRIPTING = frozenset({"torch.jit.script", "torch.jit.script_method", "torch.jit.interface"})


def _scripting(expr: ast.AST, imports: ImportTable) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return imports.qualname(target) in _SCRIPTING


def scripted_lines(tree: ast.Module, imports: ImportTable) -> list[tuple[int, int]]:
    """The (first, last) lines of every def and class TorchScript compiles, in source order."""
    named = {
        call.args[0].id
        for call in walk(tree)
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)
        if _scripting(call.func, imports)
    }
    spans = []
    for node in walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        top = node in tree.body
        if any(_scripting(d, imports) for d in node.decorator_list) or (top and node.name in named):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((first, node.end_lineno or node.lineno))
    return sorted(spans)


def without_scripted_fixes(findings: Iterable[Finding], spans: list[tuple[int, int]]) -> list[Finding]:
    """`findings`, those inside a scripted span without their fix."""
    out = []
    for f in findings:
        if f.fix is not None and any(first <= f.span.line <= last for first, last in spans):
            f = replace(f, fix=None)
        out.append(f)
    return out
