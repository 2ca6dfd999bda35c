"""FL102's fix for a pad up to a length: `if n < K: t = F.pad(t, (0, K - n))` without the test.

kornia SIFT (`ScaleSpaceDetector._detect`) joins each octave's top-K, whose length the data decides,
and pads the result up to `num_feats` when it is short:

    n_candidates = responses.size(1)
    if n_candidates < num_feats:
        pad = num_feats - n_candidates
        responses = F.pad(responses, (0, pad), value=float("-inf"))
        lafs = F.pad(lafs, (0, 0, 0, 0, 0, pad))

Once FL106's fix keeps the octaves' `nonzero` in the graph, `n_candidates` is an unbacked size and
dynamo breaks at the test. No guard decides it soundly (`bench/xfn22_pad_probes.py`):
`guard_or_true` pads always, and a negative pad crops a count above `num_feats`; `guard_or_false`
never pads, and the top-K of `num_feats` raises below it. Padding by `torch.sym_max(K - n, 0)` on
every call needs no test and gives the same values for every count: below `K` it is the original's
pad, at or above `K` a pad of zero leaves the values as they are (`sym_max` stays symbolic for an
unbacked size; in eager it is the builtin `max`).

When the rewrite gives what the original gives (each checked here; anything else gets no fix):
- the test is one comparison that holds exactly when `K - n` is positive or zero: `n < K`, `K > n`,
  `n <= K`, `K >= n` (`n < K - 1` with a pad of `K - n` would not), with `n` a count of a data-sized
  result and `K` a number, a name or an attribute;
- the `if` has no `else` and is no `elif`;
- the body is only an optional `P = K - n` and statements `t = F.pad(t, (0, ..., 0, A), value=c)`
  (`torch.nn.functional.pad`, constant mode), each padding `t` at the end of one dimension by `A`,
  the name `P` or the expression `K - n`, every other amount 0; `t` is bound earlier in the block;
  `c` reads no name the body binds and is a constant, a name or attribute, a sign of one or
  `float("-inf")` (the rewrite evaluates it where the test failed);
- no statement binds a name that `n` or `K` reads before a later one computes `K - n` (each
  statement computes its amount before it binds), and `P` is read nowhere else in the function (where
  the test failed the original left `P` unbound, the rewrite binds 0);
- the `if` line, and the test's other lines, carry no comment (the rewrite drops them).

Unsafe, by DESIGN.md's definition (identical for every input): the values, shapes and dtypes are
the original's for every count, but where the count is at least `K` the original kept `t` itself
and `F.pad` with a zero pad returns a new tensor (a copy), so a later in-place write to `t` no
longer reaches the tensor's other names, nor theirs `t`; and a zero pad of a tensor with fewer
dimensions than the pad names raises where the original skipped the pad (the padded dimension is the
one `n` measures in the code this fix is for; the lint cannot see ranks, so the message says so), as
does a limit that is not a Python int (`torch.sym_max(K - n, 0)` is `0.0` for a float `K` and asserts on
a tensor one; a float literal gets no fix).
"""

from __future__ import annotations

import ast

from fuselint.findings import Applicability, Fix
from fuselint.source.break_fixes import block_of, spans_string, whole_lines
from fuselint.source.count_branches import DataSized, _plain_limit
from fuselint.source.module import SourceFile, newline_of
from fuselint.source.nodes import walk
from fuselint.source.unbacked_ops import imports_torch_when_run

PAD = "torch.nn.functional.pad"


def pads_to_count(sf: SourceFile, node: ast.If | ast.IfExp, sized: DataSized) -> bool:
    """The `if` tests a data-sized count against another value and pads in its body: a guard
    (`count_branches`) would pad by a negative amount or not at all while compiling, so no guard is
    offered; `pad_fix` says whether the pad itself can be rewritten."""
    return (
        isinstance(node, ast.If)
        and any(sized.count(o) is not None for o in _operands(node.test))
        and any(
            isinstance(c, ast.Call) and sf.imports.qualname(c.func) == PAD for s in node.body for c in walk(s)
        )
    )


def _operands(test: ast.expr) -> list[ast.expr]:
    return [test.left, *test.comparators] if isinstance(test, ast.Compare) else []


def pad_fix(sf: SourceFile, node: ast.If, sized: DataSized, fn: ast.AST) -> Fix | None:
    """The rewrite of a pad up to `K` (module docstring), or None where it is not sound."""
    bounds = _bounds(node.test, sized)
    if bounds is None or node.orelse or not sf.line_text(node.lineno)[node.col_offset :].startswith("if"):
        return None
    count, limit = bounds
    header = range(node.lineno, (node.test.end_lineno or node.lineno) + 1)
    if any("#" in sf.line_text(n) for n in header) or not whole_lines(sf, node):
        return None
    shortfall = ast.BinOp(limit, ast.Sub(), count)  # `K - n`: only compared with the body's, never unparsed
    amounts = _body_amounts(sf, node.body, shortfall)
    if amounts is None:
        return None
    named, pads = amounts
    read = {n.id for side in (count, limit) for n in walk(side) if isinstance(n, ast.Name)}
    if _rebound_before_read(node.body, shortfall, read):
        return None
    if named is not None and _read_elsewhere(fn, node, named):
        return None
    block = block_of(fn, node)
    if block is None or not all(_bound_before(block, node, t) for t in {p.targets[0].id for p in pads}):
        return None
    if not imports_torch_when_run(sf, "torch") and sf.imports.local_name_for("torch") is not None:
        return None
    return _rewrite(sf, node, shortfall, named, count, limit)


def _bounds(test: ast.expr, sized: DataSized) -> tuple[ast.expr, ast.expr] | None:
    """(n, K) for a test that holds exactly when `K - n >= 0` or `K - n > 0`: `n < K`, `n <= K`,
    `K > n`, `K >= n`, with `n` a count of a data-sized result and `K` a plain limit."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right, op = test.left, test.comparators[0], type(test.ops[0])
    if op in (ast.Lt, ast.LtE):
        count, limit = left, right
    elif op in (ast.Gt, ast.GtE):
        count, limit = right, left
    else:
        return None
    if sized.count(count) is None or sized.count(limit) is not None or not _plain_limit(limit):
        return None
    if isinstance(limit, ast.Constant) and type(limit.value) is not int:
        return (
            None  # `torch.sym_max(2.5 - n, 0)` is 0.0 where the count is above it, and `F.pad` raises on it
        )
    return count, limit


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a, annotate_fields=False, include_attributes=False).replace(
        "Store()", "Load()"
    ) == ast.dump(b, annotate_fields=False, include_attributes=False).replace("Store()", "Load()")


def _body_amounts(
    sf: SourceFile, body: list[ast.stmt], shortfall: ast.expr
) -> tuple[str | None, list[ast.Assign]] | None:
    """(the name bound to `K - n`, the pad statements) where the body is only those, else None."""
    named: str | None = None
    pads: list[ast.Assign] = []
    for stmt in body:
        if (
            not isinstance(stmt, ast.Assign)
            or len(stmt.targets) != 1
            or not isinstance(stmt.targets[0], ast.Name)
        ):
            return None
        target = stmt.targets[0].id
        if named is None and not pads and _same(stmt.value, shortfall):
            named = target
            continue
        if not _end_pad(sf, stmt.value, target, named, shortfall, {named, *(p.targets[0].id for p in pads)}):
            return None
        pads.append(stmt)
    return (named, pads) if pads else None


def _end_pad(
    sf: SourceFile, call: ast.expr, target: str, named: str | None, shortfall: ast.expr, bound
) -> bool:
    """`target = F.pad(target, (0, ..., 0, A), value=c)` with `A` the named shortfall or `K - n`."""
    if not isinstance(call, ast.Call) or sf.imports.qualname(call.func) != PAD or len(call.args) != 2:
        return False
    tensor, widths = call.args
    if not (isinstance(tensor, ast.Name) and tensor.id == target):
        return False
    if not isinstance(widths, ast.Tuple) or len(widths.elts) < 2 or len(widths.elts) % 2:
        return False
    *zeros, amount = widths.elts
    if not all(isinstance(z, ast.Constant) and type(z.value) is int and z.value == 0 for z in zeros):
        return False
    by_name = named is not None and isinstance(amount, ast.Name) and amount.id == named
    if not by_name and not _same(amount, shortfall):
        return False
    for keyword in call.keywords:
        if keyword.arg == "mode":
            if not (isinstance(keyword.value, ast.Constant) and keyword.value.value == "constant"):
                return False
        elif keyword.arg == "value":
            if not _inert(keyword.value) or any(
                isinstance(n, ast.Name) and n.id in bound for n in walk(keyword.value)
            ):
                return False
        else:
            return False
    return True


def _inert(value: ast.expr) -> bool:
    """A pad value the rewrite may evaluate where the test failed, as the original did not: a
    constant, a name or attribute, a sign of one, or `float` of a constant (`float("-inf")`). A call
    or an operator may raise there (`1.0 / (k - n)` at `n == k`) or move a generator."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub | ast.UAdd):
        return _inert(value.operand)
    if isinstance(value, ast.Call):
        return (
            isinstance(value.func, ast.Name)
            and value.func.id == "float"
            and not value.keywords
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Constant)
        )
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Constant | ast.Name)


def _rebound_before_read(body: list[ast.stmt], shortfall: ast.expr, read: set[str]) -> bool:
    """A statement of the body binds a name that `K - n` reads before a later statement computes
    `K - n` again: the rewrite would compute it on the new value where the test read the old one.
    (Each statement computes its amount before it binds: `s = F.pad(s, (0, k - s.size(0)))` reads
    the `s` the test read, as do the sew and Anima pads in transformers and diffusers.)"""
    bound: set[str] = set()
    for stmt in body:
        if bound & read and any(_same(n, shortfall) for n in walk(stmt.value)):
            return True
        bound.update(t.id for t in stmt.targets)
    return False


def _read_elsewhere(fn: ast.AST, node: ast.If, name: str) -> bool:
    """`name` is read outside the `if`'s body, or declared global or nonlocal, in `fn`."""
    inside = {id(n) for s in node.body for n in walk(s)}
    return any(
        (
            isinstance(n, ast.Name)
            and n.id == name
            and not isinstance(n.ctx, ast.Store)
            and id(n) not in inside
        )
        or (isinstance(n, ast.Global | ast.Nonlocal) and name in n.names)
        for n in walk(fn)
    )


def _bound_before(block: list[ast.stmt], node: ast.If, name: str) -> bool:
    """`name = ...` runs earlier in the block that holds the `if`, and nothing in between deletes it."""
    for earlier in reversed(block[: next(i for i, s in enumerate(block) if s is node)]):
        if any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Del) for n in walk(earlier)
        ):
            return False
        targets = earlier.targets if isinstance(earlier, ast.Assign) else []
        if isinstance(earlier, ast.AnnAssign) and earlier.value is not None:
            targets = [earlier.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def _rewrite(
    sf: SourceFile, node: ast.If, shortfall: ast.expr, named: str | None, count: ast.expr, limit: ast.expr
) -> Fix | None:
    torch = sf.imports.local_name_for("torch")
    imports: tuple[str, ...] = ()
    if torch is None or "." in torch:
        torch, imports = "torch", ("import torch",)
    # from the comment lines above the body (below the test's last line), so that they stay; to the
    # end of the last statement, where the `if` ends, so that a comment after it stays once
    first, end = node.body[0].lineno, node.body[-1]
    while first - 1 > (node.test.end_lineno or node.lineno) and sf.line_text(first - 1).lstrip()[:1] in (
        "#",
        "",
    ):
        first -= 1
    lines = [sf.line_text(n) for n in range(first, (end.end_lineno or end.lineno) + 1)]
    lines[-1] = lines[-1].encode("utf-8")[: end.end_col_offset].decode("utf-8")
    while not lines[0].strip():  # blank lines under the test go with it
        lines.pop(0)
        first += 1
    if spans_string("\n".join(lines)):
        return None
    counted = sf.segment(count)
    if isinstance(count, ast.BinOp):  # `K - (n - 1)`, as the test and the body read it
        counted = f"({counted})"
    amount = f"{torch}.sym_max({sf.segment(limit)} - {counted}, 0)"
    # the body's first statement binds the named shortfall (`_body_amounts`), the pads may spell it out
    edits = [node.body[0].value] if named is not None else []
    edits += [
        widths.elts[-1]
        for stmt in node.body
        if isinstance(stmt.value, ast.Call) and sf.imports.qualname(stmt.value.func) == PAD
        for widths in (stmt.value.args[1],)
        if _same(widths.elts[-1], shortfall)
    ]
    for part in sorted(edits, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        if part.end_lineno != part.lineno:
            return None
        row = part.lineno - first
        raw = lines[row].encode("utf-8")
        start, end = part.col_offset, part.end_col_offset or part.col_offset
        lines[row] = (raw[:start] + amount.encode("utf-8") + raw[end:]).decode("utf-8")
    header = sf.line_text(node.lineno)
    indent = header[: len(header) - len(header.lstrip())]
    opening = sf.line_text(node.body[0].lineno)
    inner = opening[: len(opening) - len(opening.lstrip())]
    step = len(inner) - len(indent)
    if step <= 0 or any(line[:step].strip() for line in lines):
        return None
    content = newline_of(sf.text).join(line[step:] for line in lines)[len(indent) :]
    message = (
        f"pad without the test, by `{amount}`: the same values for every count (below "
        f"`{sf.segment(limit)}` the original's pad, at or above it a pad of zero) and no test of the "
        "unbacked count while compiling; a guard here would pad by a negative amount (cropping) or not "
        "at all. Unsafe: where the count is at least the limit the original kept each tensor itself and "
        "the fixed code holds a copy (a later in-place write no longer reaches its other names); a zero "
        "pad of a tensor with fewer dimensions than the pad names raises where the original skipped it; "
        f"and it assumes `{sf.segment(limit)}` is a Python int (a float or tensor limit makes the zero pad or "
        "`sym_max` raise)"
    )
    return Fix(Applicability.UNSAFE, message, (sf.replace(node, content),), imports)
