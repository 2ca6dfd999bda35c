"""What a test evaluates to while dynamo traces, where dynamo makes it a constant.

`torch.compiler.is_compiling()` is True there and `torch.jit.is_scripting()` False, so the code
one of them guards is traced or never traced whatever the inputs. The dataflow walks only the
branches dynamo takes, and the scope follows only calls made from them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fuselint.source.nodes import child_nodes, remembered

# Functions dynamo evaluates to a constant while tracing: code they guard is never traced.
# `is_exporting()` is not one: torch.compile traces it as False, torch.export as True (torch 2.13:
# `1 if torch.compiler.is_exporting() else bool(t.sum() > 0)` breaks under torch.compile).
_COMPILING = frozenset({"is_compiling", "is_dynamo_compiling", "is_torchdynamo_compiling"})
_NOT_COMPILING = frozenset({"is_scripting", "is_in_onnx_export"})


def compile_truth(test: ast.expr) -> bool | None:
    """The value `test` has while dynamo traces (True/False), or None when it is not a constant there."""
    if isinstance(test, ast.Call):
        func = test.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _COMPILING or (name == "is_tracing" and isinstance(func, ast.Name)):
            # transformers' `is_tracing(t)` is true under dynamo (`torch.jit.is_tracing()` is not)
            return True
        if name in _NOT_COMPILING or (name == "is_tracing" and isinstance(func, ast.Attribute)):
            return False
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = compile_truth(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [compile_truth(v) for v in test.values]
        if isinstance(test.op, ast.And):
            if False in values:
                return False
            return True if all(v is True for v in values) else None
        if True in values:
            return True
        return False if all(v is False for v in values) else None
    return None


def live_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `fn` (a function) on paths dynamo may trace: the body of an `if` or `while`
    whose test is False while tracing (`elif torch.jit.is_tracing():`) is left out, and so is the
    `else` of one that is True. Listed once per file's analysis: the scope and the dataflow both
    read each function's."""
    return remembered("live", fn, _live_nodes)


def _live_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    stack: list[ast.AST] = [fn]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.While)):
            truth = compile_truth(node.test)
            stack.append(node.test)
            if truth is not False:
                stack.extend(node.body)
            if truth is not True:
                stack.extend(node.orelse)
            continue
        stack.extend(child_nodes(node))
