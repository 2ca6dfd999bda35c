"""FL106's fix for a constant written through masked index tensors: `x[i[m], j[m]] = c`.

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
"""

from __future__ import annotations

import ast
from itertools import chain, count

from fuselint.findings import Applicability, Fix
from fuselint.source.break_fixes import fresh_name, whole_lines
from fuselint.source.dataflow import BOOL, FunctionFlow, Site
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
