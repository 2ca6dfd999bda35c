"""FL402: a needless copy, `y = x.clone()` where neither tensor is ever changed in place.

A clone reads and writes the whole tensor: one more kernel and two more passes over memory
in eager, and a copy that a graph must materialize when `y` crosses a graph break. It is
needed only when `x` or `y` is later mutated in place (or handed to code that may be). The
check is deliberately strict: the function must contain no in-place operation at all,
`y` must only feed arithmetic, tensor methods and torch functions, and `x` must not be
passed to submodules or other code after the copy.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.checks import check
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import HOST, TENSORS, FunctionFlow, flows
from fuselint.source.module import SourceFile
from fuselint.source.nodes import child_nodes, walk
from fuselint.source.scope import ModelFunction


def _mutates_in_place(flow: FunctionFlow) -> bool:
    """Any in-place update in the traced code: `t.add_()`, `out=`, `t[i] = v`, `t += v`."""
    for site in flow.of(ast.Call):
        func = site.node.func
        if isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_"):
            return True
        for keyword in site.node.keywords:
            if keyword.arg == "out" or (
                keyword.arg == "inplace"
                and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value)
            ):
                return True
    for site in flow.of(ast.Assign, ast.AugAssign, ast.AnnAssign):
        stmt = site.node
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(t, (ast.Subscript, ast.Attribute)) for t in targets):
            return True
        if isinstance(stmt, ast.AugAssign) and flow.kind(stmt.target, site.env) not in (None, *HOST):
            return True
    return False


def _harmless_use(use: ast.Name, parents: dict[int, ast.AST], flow: FunctionFlow, returned_ok: bool) -> bool:
    """The value is only read: arithmetic, a non-mutating tensor method, an argument of a torch function."""
    parent = parents.get(id(use))
    if isinstance(parent, (ast.BinOp, ast.Compare, ast.UnaryOp)):
        return True
    if isinstance(parent, ast.Return):
        return returned_ok
    if isinstance(parent, ast.Attribute) and parent.value is use:
        call = parents.get(id(parent))
        return not (isinstance(call, ast.Call) and call.func is parent) or not parent.attr.endswith("_")
    if isinstance(parent, ast.keyword):
        parent = parents.get(id(parent))
    if isinstance(parent, ast.Call) and use is not parent.func:
        qual = flow.imports.qualname(parent.func) or ""
        return (
            qual.startswith("torch.")
            and not qual.startswith("torch.nn.")
            or qual.startswith("torch.nn.functional.")
        )
    return False


def _needless_clone(flow: FunctionFlow, assign: ast.Assign, parents: dict[int, ast.AST]) -> ast.Call | None:
    value = assign.value
    if not (
        len(assign.targets) == 1
        and isinstance(assign.targets[0], ast.Name)
        and isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "clone"
        and not value.args
        and not value.keywords
        and isinstance(value.func.value, ast.Name)
    ):
        return None
    copy, source = assign.targets[0].id, value.func.value.id
    if copy == source or flow.assigned.get(copy) != 1:
        return None
    env = next(s.env for s in flow.of(ast.Assign) if s.node is assign)
    if flow.kind(value.func.value, env) not in TENSORS:
        return None
    names = flow.of(ast.Name)
    for site in names:
        node = site.node
        if not isinstance(node.ctx, ast.Load):
            continue
        if node.id == copy and not _harmless_use(node, parents, flow, returned_ok=False):
            return None
        after = (node.lineno, node.col_offset) > (assign.lineno, assign.col_offset)
        if node.id == source and after and not _harmless_use(node, parents, flow, returned_ok=True):
            return None
    return value


@check("FL402")
def needless_copy(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        clones = [
            s.node
            for s in flow.of(ast.Assign)
            if isinstance(s.node.value, ast.Call)
            and isinstance(s.node.value.func, ast.Attribute)
            and s.node.value.func.attr == "clone"
        ]
        if not clones or _mutates_in_place(flow):
            continue
        parents = {id(c): n for n in walk(flow.fn.node) for c in child_nodes(n)}
        for assign in clones:
            call = _needless_clone(flow, assign, parents)
            if call is None:
                continue
            source = call.func.value.id
            fix = Fix(Applicability.UNSAFE, f"use `{source}` itself", (sf.replace(call, source),))
            message = f"`{sf.segment(call)}` copies a tensor that is never changed in place: {rule.message}"
            yield finding(sf, rule, call, message, fix)
