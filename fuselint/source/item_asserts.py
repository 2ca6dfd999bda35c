"""FL101's fix for an assert that reads a tensor's value with `.item()`: `assert x.max().item() <= n`.

`.item()` copies the value to the host and dynamo (torch 2.13) breaks there (gb0124, "Unsupported
Tensor.item() call"). Without it the assert tests the 0-d tensor: in eager Python reads its truth
as it read the number's (the same AssertionError, skipped under `python -O` as before), and dynamo
rewrites an assert on a tensor into `torch._assert_async` (`rewrite_assert_with_torch_assert`, on
by default), which stays in the graph: one graph under `fullgraph=True`.

    assert x.max() <= n                  # was: assert x.max().item() <= n
    assert torch.all(ids >= 0), "msg"    # was: assert torch.all(ids >= 0).item(), "msg"

No output changes: an assert computes nothing the code reads. Unsafe for two things: a compiled run
that fails raises RuntimeError, not AssertionError; and a comparison on the tensor promotes as
tensors do, in the tensor's dtype (a float32 `x` against `0.1` compares in float32, where `.item()`
compared the float64 number; an int64 above 2**24 against a float compares in float32). A boolean
`.item()` that is the whole test has no such comparison.

Only a single comparison with one `.item()` as one of its two sides (`a < b < c` is an `and`, which
reads a tensor's truth outside the assert), or a boolean tensor's `.item()` as the whole test; a
message that is a string literal or none (dynamo keeps only a constant message).
"""

from __future__ import annotations

import ast

from fuselint.findings import Applicability, Fix
from fuselint.source.checks._shared import atom
from fuselint.source.dataflow import BOOL, FunctionFlow, Site
from fuselint.source.module import SourceFile
from fuselint.source.nodes import walk

ITEM_ASSERT_MESSAGE = (
    "assert on the tensor itself: eager runs read its truth as they read the number's, and dynamo "
    "turns an assert on a tensor into `torch._assert_async`, which stays in the graph (assumes a compiled "
    "failure may raise RuntimeError instead of AssertionError, and that the comparison gives the same "
    "truth in the tensor's dtype: a float32 tensor against 0.1 compares in float32)"
)
_COMPARISONS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def _items(node: ast.AST) -> int:
    return sum(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "item"
        for n in walk(node)
    )


def _tested(call: ast.Call, flow: FunctionFlow, site: Site, parents: dict[int, ast.AST]) -> ast.Assert | None:
    """The assert whose test is `call` on a boolean tensor, or a single comparison with `call` as
    one side and no other `.item()`."""
    parent = parents.get(id(call))
    if isinstance(parent, ast.Assert) and parent.test is call:
        return parent if flow.kind(call.func.value, site.env) == BOOL else None
    stmt = parents.get(id(parent))
    if not (isinstance(parent, ast.Compare) and isinstance(stmt, ast.Assert) and stmt.test is parent):
        return None
    if len(parent.ops) != 1 or not isinstance(parent.ops[0], _COMPARISONS) or _items(parent) != 1:
        return None
    return stmt if call in (parent.left, parent.comparators[0]) else None


def item_assert(sf: SourceFile, site: Site, flow: FunctionFlow, parents: dict[int, ast.AST]) -> Fix | None:
    """The fix for `assert t.item() OP v[, "msg"]` or `assert b.item()[, "msg"]` at its `.item()`."""
    call = site.node
    stmt = _tested(call, flow, site, parents)
    if stmt is None:
        return None
    message = stmt.msg
    if message is not None and not (isinstance(message, ast.Constant) and isinstance(message.value, str)):
        return None
    return Fix(Applicability.UNSAFE, ITEM_ASSERT_MESSAGE, (sf.replace(call, atom(sf, call.func.value)),))
