"""FL107: a Python loop over a tensor's rows or elements.

`for row in x:`, `for i in range(x.shape[0]): out[i] = ...` or a per-timestep loop over
`range(seq_len)` run the body once per row: dynamo unrolls the loop into one copy of the
body per iteration (hundreds of small kernels, a recompile whenever the length changes)
and eager pays a launch per op per row. A batched op over the whole tensor does the
same work in a few kernels.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.checks import check
from fuselint.source.dataflow import DIM, TENSORISH, TENSORS, FunctionFlow, Site, describe, flows
from fuselint.source.module import SourceFile
from fuselint.source.scope import ModelFunction


def _indexes_with(body: list[ast.stmt], name: str, flow: FunctionFlow, env) -> bool:
    """Some statement of the loop body indexes a tensor with the loop variable (`x[i]`, `out[:, i] =`)."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Subscript):
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if any(isinstance(p, ast.Name) and p.id == name for p in parts):
                    if flow.kind(node.value, env) in TENSORISH:
                        return True
    return False


def _rows(expr: ast.expr, flow: FunctionFlow, env) -> bool:
    """`expr` is surely a tensor: a parameter only guessed to be one may as well be a list of them."""
    if isinstance(expr, ast.Name) and expr.id in flow.guessed and flow.assigned.get(expr.id) == 1:
        return False
    return flow.kind(expr, env) in TENSORS


def _row_loop(site: Site, flow: FunctionFlow) -> str | None:
    loop = site.node
    iterable, env = loop.iter, site.env
    if _rows(iterable, flow, env):
        return f"`for ... in {describe(iterable, 30)}` iterates over a tensor's rows"
    if isinstance(iterable, ast.Call):
        func = iterable.func
        if isinstance(func, ast.Name) and func.id in ("enumerate", "zip", "reversed"):
            for arg in iterable.args:
                if _rows(arg, flow, env):
                    return f"`{func.id}({describe(arg, 30)})` iterates over a tensor's rows"
            return None
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "unbind"
            and flow.kind(func.value, env) in TENSORS
        ):
            return f"`for ... in {describe(iterable, 30)}` iterates over a tensor's slices"
        if (
            isinstance(func, ast.Name)
            and func.id == "range"
            and iterable.args
            and isinstance(loop.target, ast.Name)
        ):
            end = iterable.args[0] if len(iterable.args) == 1 else iterable.args[1]
            if flow.kind(end, env) == DIM and _indexes_with(loop.body, loop.target.id, flow, env):
                return f"`range({describe(end, 30)})` runs once per row of a tensor"
    return None


@check("FL107")
def python_loop_over_tensor(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        for site in flow.of(ast.For):
            what = _row_loop(site, flow)
            if what is not None:
                loop = site.node
                yield Finding(
                    code=rule.code,
                    message=f"{what}: {rule.message}",
                    span=sf.span(loop, loop.iter),
                    source_line=sf.line_text(loop.lineno).strip(),
                )
