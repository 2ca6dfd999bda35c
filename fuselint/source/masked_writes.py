"""Fixes for constants written through masks: FL106's `x[i[m], j[m]] = c`, and FL102's
`if <test>: t[m] = c`.

Selecting the indices with a boolean mask gives them a data-dependent length, and dynamo (torch
2.13) breaks there (gb0036). Writing through every index instead, with the old value kept where the
mask is False, has static shapes and traces:

    kept = x[i, j]
    x[i, j] = kept.masked_fill(m.reshape(m.shape + (1,) * (kept.dim() - m.dim())), c)

`i[m]` needs `m`'s shape to lead `i`'s, so `m`, padded with ones to the rank of `x[i, j]`,
broadcasts over exactly the rows `i[m]` picks; `masked_fill` casts `c` to `x`'s dtype as the
assignment does. Unsafe: equal only where the indexed positions are distinct. Where two rows name
the same position, one kept and one masked, the original writes `c` there, while the rewrite writes
both and which lands is not defined (index_put without accumulate). The indices SOLD2 writes this
way come from one-argument `torch.where`, whose positions are distinct.

A store under a tensor test (FastSpeech2's `if duration_labels.sum() == 0:
duration_labels[duration_labels.sum(dim=1).eq(0)] = 1`) breaks at the test (gb0170): Python must
read the tensor to pick a path. Folding the test into the mask, `t[m & (test)] = c`, writes the same
elements for every input (none where the test fails) and traces: a boolean-mask store of a number
keeps its shapes (`guarded_masked_store`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from itertools import chain, count

from fuselint.findings import Applicability, Fix
from fuselint.source.break_fixes import fresh_name, whole_lines
from fuselint.source.checks._shared import atom, has_comment
from fuselint.source.dataflow import BOOL, TENSORS, FunctionFlow, Site
from fuselint.source.module import SourceFile, newline_of

MASKED_WRITE_MESSAGE = (
    "write through every index and keep the old value where the mask is False (`masked_fill`), "
    "which has static shapes (assumes the indexed positions are distinct: where one position is "
    "named twice, once kept and once masked, the original writes the constant and the fix may not)"
)


def _plain(node: ast.expr) -> bool:
    """A name or a chain of attributes on one (`x`, `self.x`): reading it twice reads the same."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _constant(node: ast.expr) -> bool:
    """A number or bool literal, maybe negated."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool)


def masked_write(sf: SourceFile, site: Site, flow: FunctionFlow) -> Fix | None:
    """The fix for `x[i[m], ...] = c` at the first index's mask site, else None.

    Every index is `a[m]` with the same mask name `m`, a boolean tensor; `x` and each `a` are names
    or attribute chains; `c` is a number literal; the statement stands on its own lines."""
    stmt, sub = site.stmt, site.node
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and whole_lines(sf, stmt)):
        return None
    target = stmt.targets[0]
    if not isinstance(target, ast.Subscript) or not _plain(target.value) or not _constant(stmt.value):
        return None
    parts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    if parts[0] is not sub:
        return None  # one fix per statement, at its first index
    mask = sub.slice if isinstance(sub, ast.Subscript) else None
    if not isinstance(mask, ast.Name) or flow.kind(mask, site.env) != BOOL:
        return None
    for part in parts:
        if not (
            isinstance(part, ast.Subscript)
            and _plain(part.value)
            and isinstance(part.slice, ast.Name)
            and part.slice.id == mask.id
        ):
            return None
    indices = ", ".join(sf.segment(part.value) for part in parts)
    written = f"{sf.segment(target.value)}[{indices}]"
    kept = fresh_name(flow.fn.node, chain(["kept"], (f"kept_{n}" for n in count(1))))
    m = mask.id
    first = sf.line_text(stmt.lineno)
    indent = first[: len(first) - len(first.lstrip())]
    newline = newline_of(sf.text)
    content = (
        f"{kept} = {written}{newline}{indent}"
        f"{written} = {kept}.masked_fill({m}.reshape({m}.shape + (1,) * ({kept}.dim() - {m}.dim())), "
        f"{sf.segment(stmt.value)})"
    )
    return Fix(Applicability.UNSAFE, MASKED_WRITE_MESSAGE, (sf.replace(stmt, content),), ())


GUARDED_STORE_MESSAGE = (
    "fold the test into the mask, `t[m & (test)] = c`: the same elements are written for every input "
    "(none where the test fails), and a boolean-mask store of a number keeps its shapes, so dynamo "
    "does not stop to read the test"
)
ANY_GUARD_MESSAGE = (
    "drop the guard: a store through a mask with no True element writes nothing, so "
    "`if m.any(): t[m] = c` and `t[m] = c` write the same for every input"
)
# Reductions that give a 0-d tensor when called without a dim: a test built of them (and of numbers)
# is 0-d, so `m & (test)` has the mask's shape (a one-element test of another shape would broadcast
# the mask to a new rank).
_FULL_REDUCTIONS = frozenset(
    {"sum", "any", "all", "max", "min", "mean", "prod", "amax", "amin", "count_nonzero"}
)


def _zero_dim(node: ast.expr, flow: FunctionFlow, env) -> bool:
    """`x.sum()` or `torch.sum(x)` of a tensor `x`, without a dim: a 0-d tensor."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords):
        return False
    if node.func.attr not in _FULL_REDUCTIONS:
        return False
    if not node.args:
        return flow.kind(node.func.value, env) in TENSORS
    qual = flow.imports.qualname(node.func)
    return (
        len(node.args) == 1 and qual == f"torch.{node.func.attr}" and flow.kind(node.args[0], env) in TENSORS
    )


def _number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _zero_dim_test(test: ast.expr, flow: FunctionFlow, env) -> bool:
    """A boolean 0-d tensor: a full reduction (`m.any()`), or one compared with a number."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        return (_zero_dim(left, flow, env) and (_number(right) or _zero_dim(right, flow, env))) or (
            _number(left) and _zero_dim(right, flow, env)
        )
    return _zero_dim(test, flow, env) and flow.kind(test, env) == BOOL


def _store(stmt: ast.stmt, sf: SourceFile, flow: FunctionFlow, env) -> ast.Subscript | None:
    """The target of `t[m] = c` on one line: `t` a name or attribute chain, `m` a boolean tensor,
    `c` a number or bool literal."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.lineno == stmt.end_lineno):
        return None
    target = stmt.targets[0]
    if not (isinstance(target, ast.Subscript) and _plain(target.value) and _constant(stmt.value)):
        return None
    mask = target.slice
    if isinstance(mask, (ast.Tuple, ast.Slice)) or flow.kind(mask, env) != BOOL:
        return None
    return target


def _any_of_mask(test: ast.expr, flow: FunctionFlow) -> ast.expr | None:
    """`m` in `m.any()` or `torch.any(m)`."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "any"):
        return None
    if test.keywords:
        return None
    if not test.args:
        return test.func.value
    if len(test.args) == 1 and flow.imports.qualname(test.func) == "torch.any":
        return test.args[0]
    return None


def guarded_masked_store(
    sf: SourceFile, site: Site, flow: FunctionFlow, pure: Callable[[ast.expr], bool]
) -> Fix | None:
    """FL102's fix for `if <test>: t[m] = c` (one or more such stores, no `else`), else None.

    Safe: with `m & (test)` the stores write the elements they wrote, and none where the test
    fails. The test and the masks are `pure` (computing a mask where the branch did not run changes
    nothing) and the test is 0-d, so the mask keeps its shape. Several stores read the test once,
    before the first writes, as the `if` did. `if m.any():` over stores through `m` itself is
    dropped instead."""
    stmt, env = site.node, site.env
    if not (isinstance(stmt, ast.If) and stmt.body and not stmt.orelse and whole_lines(sf, stmt)):
        return None
    if has_comment(sf, stmt) or not sf.line_text(stmt.lineno)[stmt.col_offset :].startswith("if"):
        return None  # a comment the rewrite would drop, or an `elif`
    targets = [_store(s, sf, flow, env) for s in stmt.body]
    if any(t is None for t in targets) or not all(pure(t.slice) for t in targets):
        return None
    first = sf.line_text(stmt.lineno)
    indent = first[: len(first) - len(first.lstrip())]
    newline = newline_of(sf.text)
    guarded = _any_of_mask(stmt.test, flow)
    if guarded is not None and all(ast.dump(t.slice) == ast.dump(guarded) for t in targets):
        lines = [sf.segment(s) for s in stmt.body]
        return Fix(
            Applicability.SAFE, ANY_GUARD_MESSAGE, (sf.replace(stmt, (newline + indent).join(lines)),), ()
        )
    if not (_zero_dim_test(stmt.test, flow, env) and pure(stmt.test)):
        return None
    lines = []
    if len(targets) == 1:
        test = atom(sf, stmt.test)
    else:
        test = fresh_name(flow.fn.node, chain(["taken"], (f"taken_{n}" for n in count(1))))
        lines.append(f"{test} = {sf.segment(stmt.test)}")
    for store, target in zip(stmt.body, targets, strict=True):
        written = f"{sf.segment(target.value)}[{atom(sf, target.slice)} & {test}]"
        lines.append(f"{written} = {sf.segment(store.value)}")
    return Fix(
        Applicability.SAFE, GUARDED_STORE_MESSAGE, (sf.replace(stmt, (newline + indent).join(lines)),), ()
    )
