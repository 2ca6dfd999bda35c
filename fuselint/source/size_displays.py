"""Sizes as dynamo reads them: one by one or in a tuple or list display, and which tensors among
them dynamo knows at trace time.

A tensor inside a size display (`torch.zeros((2, n))`, `size=(2, n)`, `x.view((n, -1))`) is read
on the host like one handed alone (gb0033, torch 2.13). But a torch op on Python numbers
(`torch.div(seq_len, w, rounding_mode="trunc") - 1`, longformer's chunk count, with `seq_len` a
shape) makes a tensor whose value dynamo knows while tracing: used as a size it traces (a branch on
it still breaks). `host_made` tells such a value from a tensor computed from data.
"""

from __future__ import annotations

import ast

from fuselint.source.dataflow import Env, FunctionFlow

# torch's arithmetic, which on Python numbers gives a 0-d tensor of a value known while tracing.
_ARITHMETIC_OPS = frozenset({
    "div", "true_divide", "floor_divide", "remainder", "fmod", "add", "sub", "subtract", "mul",
    "multiply", "ceil", "floor", "round", "trunc", "minimum", "maximum", "clamp", "abs", "neg", "pow",
})  # fmt: skip
_DEPTH = 3


def size_parts(sizes: list[ast.expr]) -> list[ast.expr]:
    """Each size of `sizes`, those inside a tuple or list display included; starred ones left out."""
    parts: list[ast.expr] = []
    for size in sizes:
        parts.extend(size.elts if isinstance(size, (ast.Tuple, ast.List)) else [size])
    return [p for p in parts if not isinstance(p, ast.Starred)]


def host_made(expr: ast.expr, flow: FunctionFlow, env: Env, depth: int = 0) -> bool:
    """`expr` is computed by torch arithmetic from Python numbers only (no tensor of data enters):
    a name counts through its one assignment in the function."""
    if depth > _DEPTH:
        return False
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.UnaryOp):
        return host_made(expr.operand, flow, env, depth)
    if isinstance(expr, ast.BinOp):
        return host_made(expr.left, flow, env, depth) and host_made(expr.right, flow, env, depth)
    if isinstance(expr, ast.Call):
        qual = flow.imports.qualname(expr.func) or ""
        return (
            qual.startswith("torch.")
            and qual.rsplit(".", 1)[-1] in _ARITHMETIC_OPS
            and bool(expr.args)
            and all(host_made(a, flow, env, depth + 1) for a in expr.args)
            and all(k.arg == "rounding_mode" for k in expr.keywords)
        )
    if not flow.is_tensorish(expr, env):
        return True  # a shape, an int option, a config field
    if isinstance(expr, ast.Name) and flow.assigned.get(expr.id) == 1:
        value = _assigned_value(flow, expr.id)
        return value is not None and host_made(value[0], flow, value[1], depth + 1)
    return False


def _assigned_value(flow: FunctionFlow, name: str) -> tuple[ast.expr, Env] | None:
    """The value of `name = value` (its only store in the function), with the kinds before it."""
    for site in flow.of(ast.Assign):
        stmt = site.node
        if any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return stmt.value, site.env
    return None
