"""FL106's fix for a mixture-of-experts loop over the experts the routing hit.

transformers' eager experts (switch_transformers, openai_privacy_filter and 70 more families in
5.23) write

    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit:
        idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
        ...
        final.index_add_(0, top_x, rows)

dynamo cannot put `nonzero`'s data-sized result in its graph, nor iterate one: the loop's frame
breaks (a custom op for the `nonzero` only moves the break into the loop, NOTES loop27). Over every
expert index instead, `for expert_idx in range(expert_hit.shape[0])`, the loop has a static trip
count, and an expert no token picked adds nothing: its `torch.where` row is empty, so its
`index_add_` adds no row. The body's own `torch.where` then keeps its data-sized rows in the graph
as FL106's custom op (the next round of `--fix`), and the whole loop traces as one graph.

The fix checks the shape it relies on:
- the hit test is `<mask>.sum(dim=<all but the first>) > 0` (also `torch.greater`, `gt`, `!=`), the
  mask's rank known from a `permute` (so the test is 1-d and its length the experts' count);
- the body selects its rows with a one-argument `torch.where` of `<mask>[<index>]`, writes nothing but
  `<acc>.index_add_(0, <those rows>, ...)`, and leaves the loop only by `continue`;
- the index is read only as `idx[0]`, `t[idx]`, an `==`/`!=` test of an `if`, or in an f-string, and
  not after the loop: each reads the same from the Python int that the new loop binds.

Unsafe: outputs are bit-identical when the mask holds no negative counts (a one-hot routing mask:
a row with no positive sum is then empty) and the body's calls accept zero rows (an expert's MLP
does; a BatchNorm in training would raise) and have no other effect. Prove it with `--entry`.
"""

from __future__ import annotations

import ast

from fuselint.findings import Applicability, Edit, Fix
from fuselint.source.checks._shared import has_comment
from fuselint.source.dataflow import FunctionFlow, Site
from fuselint.source.module import SourceFile
from fuselint.source.nodes import int_literal, parent_map, walk

MESSAGE = (
    "loop over every index of the hit test, `range({hit}.shape[0])`, instead of the `nonzero` of it: the "
    "loop's trip count is then static and dynamo traces it, and an index no row picked adds nothing "
    "(its `torch.where` is empty, so its `index_add_` adds no row); the body's `torch.where` stays in "
    "the graph as FL106's custom op (assumes the mask holds no negative counts, as a one-hot routing "
    "mask does, and that the body's calls accept zero rows and have no other effect; it runs once per "
    "expert, hit or not)"
)

_TESTS = frozenset({"greater", "gt", "ne"})  # `x > 0` or `x != 0` as a call
_IN_PLACE_ACC = "index_add_"


def every_index(sf: SourceFile, site: Site, flow: FunctionFlow) -> Fix | None:
    """The fix for `hit = <test>.nonzero()` walked by `for e in hit:` (module docstring), else None."""
    call, stmt = site.node, site.stmt
    fn = flow.fn.node
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    ):
        return None
    hit = stmt.targets[0].id
    row_rank = _nonzero_rows(stmt.value, call)
    if row_rank is None:
        return None
    test = call.func.value  # `_nonzero_rows` took only `<test>.nonzero()`
    parents = parent_map(fn)
    mask = _hit_mask(test, fn, parents, stmt.lineno)
    if mask is None:
        return None
    loops = [
        n for n in walk(fn) if isinstance(n, ast.For) and isinstance(n.iter, ast.Name) and n.iter.id == hit
    ]
    reads = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == hit and isinstance(n.ctx, ast.Load)]
    if len(loops) != 1 or len(reads) != 1 or _bindings(fn, hit) != [stmt]:
        return None
    loop = loops[0]
    if loop.orelse or not isinstance(loop.target, ast.Name) or not loop.lineno > stmt.lineno:
        return None
    masks = _bindings(fn, mask)
    if masks is None or any(stmt.lineno < b.lineno <= (loop.end_lineno or loop.lineno) for b in masks):
        return None  # the mask is bound again between the test and the loop's end
    if _written(fn, mask, stmt.lineno, loop.end_lineno or loop.lineno):
        return None  # an expert the test left out may have rows in the mask the loop reads
    index = loop.target.id
    made = _body(sf, loop, index, mask, row_rank, parents)
    if made is None:
        return None
    body_edits, variable = made
    if _read_outside(fn, loop, index) or _read_outside(fn, loop, variable):
        return None
    if any(_read_outside(fn, loop, name) for name in _stored(loop.body)):
        return None  # after the loop it would hold the last expert's value, not the last hit one's
    target = (sf.replace(loop.target, variable),) if variable != index else ()
    edits = (
        sf.replace(stmt.value, sf.segment(test)),
        *target,
        sf.replace(loop.iter, f"range({hit}.shape[0])"),
        *body_edits,
    )
    return Fix(Applicability.UNSAFE, MESSAGE.format(hit=hit), edits)


# ---------------------------------------------------------------- the hit test


def _nonzero_rows(value: ast.expr, call: ast.AST) -> int | None:
    """1 when `value` is `<t>.nonzero()` (rows of one index), 0 for `<t>.nonzero().squeeze(-1)`
    (0-d rows); None for anything else."""
    squeezed = 0
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "squeeze"
        and value.func.value is call
        and len(value.args) == 1
        and not value.keywords
        and int_literal(value.args[0]) in (-1, 1)
    ):
        squeezed, value = 1, call
    if value is not call or not isinstance(call, ast.Call):
        return None
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "nonzero" and not call.args):
        return None
    if any(k.arg != "as_tuple" or _constant(k.value) is not False for k in call.keywords):
        return None
    return 1 - squeezed


def _hit_mask(test: ast.expr, fn: ast.AST, parents: dict[int, ast.AST], line: int) -> str | None:
    """The mask's name when `test` is `<mask>.sum(dim=<all dims but the first>) > 0` (1-d)."""
    summed = _positive(test)
    if not (
        isinstance(summed, ast.Call) and isinstance(summed.func, ast.Attribute) and summed.func.attr == "sum"
    ):
        return None
    mask = summed.func.value
    dims = _sum_dims(summed)
    if not isinstance(mask, ast.Name) or dims is None:
        return None
    rank = _rank(mask, fn, parents, line)
    if rank is None or len(dims) != rank - 1 or {d % rank for d in dims} != set(range(1, rank)):
        return None
    return mask.id


def _positive(test: ast.expr) -> ast.expr | None:
    """`x` of `x > 0`, `x != 0`, `torch.greater(x, 0)`, `x.gt(0)`."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Gt | ast.NotEq):
        return test.left if int_literal(test.comparators[0]) == 0 else None
    if not isinstance(test, ast.Call) or test.keywords or not isinstance(test.func, ast.Attribute):
        return None
    if test.func.attr not in _TESTS:
        return None
    if len(test.args) == 2 and isinstance(test.func.value, ast.Name) and test.func.value.id == "torch":
        return test.args[0] if int_literal(test.args[1]) == 0 else None
    if len(test.args) == 1:
        return test.func.value if int_literal(test.args[0]) == 0 else None
    return None


def _sum_dims(call: ast.Call) -> list[int] | None:
    keywords = {k.arg: k.value for k in call.keywords}
    if (
        set(keywords) - {"dim", "keepdim"}
        or _constant(keywords.get("keepdim", ast.Constant(False))) is not False
    ):
        return None
    dims = keywords.get("dim", call.args[0] if len(call.args) == 1 else None)
    if "dim" in keywords and call.args or not isinstance(dims, ast.Tuple | ast.List):
        return None
    values = [int_literal(d) for d in dims.elts]
    return None if None in values or len(set(values)) != len(values) else values


def _rank(name: ast.Name, fn: ast.AST, parents: dict[int, ast.AST], line: int) -> int | None:
    """The rank of the tensor `name` holds at `line`: its last binding above, on the function's
    straight-line path, is a `permute` (whose arguments name every dim)."""
    before = [b for b in _bindings(fn, name.id) or () if b.lineno < line]
    if not before or not _straight(before[-1], fn, parents):
        return None
    value = before[-1].value
    if not (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "permute"
    ):
        return None
    dims = value.args[0].elts if len(value.args) == 1 and isinstance(value.args[0], ast.Tuple) else value.args
    if value.keywords or not dims or any(int_literal(d) is None for d in dims):
        return None
    return len(dims)


# ---------------------------------------------------------------- the loop's body


def _body(
    sf: SourceFile, loop: ast.For, index: str, mask: str, rank: int, parents: dict[int, ast.AST]
) -> tuple[list[Edit], str] | None:
    """Edits that make the body read the Python int the new loop binds, and the loop's variable
    (`n` for a body that starts `n = int(index.item())`), or None where the body is not the shape
    the fix relies on."""
    edits: list[Edit] = []
    body = list(loop.body)
    number = _asint_literal(body[0], index, rank)
    if number is not None or (rank == 1 and _rebinds_to_first(body[0], index)):
        shares_a_line = body[0].lineno == loop.lineno or (
            len(body) > 1 and body[1].lineno == (body[0].end_lineno or body[0].lineno)
        )
        if has_comment(sf, body[0]) or shares_a_line:
            return None  # deleting its lines would delete the other statement on them too
        edits.append(sf.delete_statement(body[0]))
        body, rank = body[1:], 0
    rows = _rows(body, index if number is None else number, mask)
    if rows is None or not _only_accumulates(body, rows, index if number is None else number):
        return None
    if number is not None:  # a Python int in the original too: every read of it reads the same
        reads_index = number != index and any(
            isinstance(n, ast.Name) and n.id == index for s in body for n in walk(s)
        )
        return None if reads_index else (edits, number)
    for stmt in body:
        for node in walk(stmt):
            if isinstance(node, ast.Name) and node.id == index:
                edit = _read(sf, node, rank, parents, mask)
                if edit is None:
                    return None
                if edit is not True:
                    edits.append(edit)
    return edits, index


def _rebinds_to_first(stmt: ast.stmt, index: str) -> bool:
    """`index = index[0]`."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stmt.targets[0].id == index
        and _first_of(stmt.value, index)
    )


def _asint_literal(stmt: ast.stmt, index: str, rank: int) -> str | None:
    """`n` of a first statement `n = index.item()`, `int(index)` or `int(index.item())` (also of
    `index[0]` where rows have one element): the body then reads a Python int `n`."""
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    ):
        return None
    value = stmt.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "int":
        if len(value.args) != 1 or value.keywords:
            return None
        value = value.args[0]
    elif not _item_call(value):
        return None
    if _item_call(value):
        value = value.func.value
    if rank == 1 and _first_of(value, index):
        value = value.value
    if not (isinstance(value, ast.Name) and value.id == index):
        return None  # (`.item()` and `int()` of a one-element tensor read its element, too)
    return stmt.targets[0].id


def _item_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and not node.args
        and not node.keywords
    )


def _first_of(node: ast.AST, index: str) -> bool:
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == index
        and int_literal(node.slice) == 0
        and isinstance(node.ctx, ast.Load)
    )


def _rows(body: list[ast.stmt], index: str, mask: str) -> set[str] | None:
    """The names bound to `torch.where(<mask>[<index>])`'s index tensors in the body."""
    rows: set[str] = set()
    for stmt in _flat(body):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        value = stmt.value
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "where"
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == "torch"
            and len(value.args) == 1
            and not value.keywords
        ):
            continue
        selected = value.args[0]
        if (
            isinstance(selected, ast.Call)
            and isinstance(selected.func, ast.Attribute)
            and selected.func.attr == "squeeze"
            and [int_literal(a) for a in selected.args] == [0]
        ):
            selected = selected.func.value
        if not (
            isinstance(selected, ast.Subscript)
            and isinstance(selected.value, ast.Name)
            and selected.value.id == mask
            and isinstance(selected.slice, ast.Name)
            and selected.slice.id == index
        ):
            continue
        target = stmt.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        rows |= {n.id for n in names if isinstance(n, ast.Name)}
    return rows or None


_NO_GRAD = frozenset({"no_grad", "inference_mode"})


def _grad_off(stmt: ast.stmt) -> bool:
    """`with torch.no_grad():` (or `inference_mode()`), binding nothing."""
    return isinstance(stmt, ast.With) and all(
        item.optional_vars is None
        and isinstance(item.context_expr, ast.Call)
        and isinstance(item.context_expr.func, ast.Attribute)
        and item.context_expr.func.attr in _NO_GRAD
        and isinstance(item.context_expr.func.value, ast.Name)
        and item.context_expr.func.value.id == "torch"
        for item in stmt.items
    )


def _flat(body: list[ast.stmt]) -> list[ast.stmt]:
    """The body's statements, those inside its gradient-off `with` blocks in their place."""
    out = []
    for stmt in body:
        out.extend(_flat(stmt.body) if _grad_off(stmt) else [stmt])
    return out


def _only_accumulates(body: list[ast.stmt], rows: set[str], index: str) -> bool:
    """The body binds plain names (never the mask rows' names or the index again), its one effect
    is `<acc>.index_add_(0, <row>, ...)` (at least once), and it leaves only by `continue`. Its
    `if`s may take either side (for an index no row picked, both run on zero rows); `x *= c` only
    updates a value the body computed (`_fresh`); `with torch.no_grad():` only turns off autograd."""
    adds = 0
    bound = _stored(body)
    for stmt in body:
        for node in walk(stmt):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                return False
            if isinstance(node, ast.Break | ast.Return | ast.Raise | ast.Yield | ast.YieldFrom | ast.Await):
                return False
            if isinstance(node, ast.Global | ast.Nonlocal | ast.Delete | ast.AnnAssign):
                return False
            if isinstance(node, ast.For | ast.While | ast.Try | ast.NamedExpr):
                return False
            if isinstance(node, ast.With) and not _grad_off(node):
                return False
            if isinstance(node, ast.AugAssign) and not (
                isinstance(node.target, ast.Name) and _fresh(body, node.target.id)
            ):
                return False
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    if not all(isinstance(n, ast.Name) for n in names):
                        return False  # an attribute or item store
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr.endswith("_")
            ):
                if not _accumulates(node, rows, bound):
                    return False
                adds += 1
    if index in bound or any(_binds_again(body, name) for name in rows):
        return False
    return adds > 0 and _bound_before_read(body, bound, set()) is not None


def _bound_before_read(body: list[ast.stmt], bound: set[str], known: set[str]) -> set[str] | None:
    """The body's names bound on every path through `body` (after `known`), or None where one is
    read before this pass binds it: it would then hold an earlier expert's value, and the new loop
    runs experts the old one skipped (`if rows.numel(): y = ...` then `y` read, `z = z + ...`)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            if _reads(stmt.test, bound) - known:
                return None
            sides = [_bound_before_read(side, bound, set(known)) for side in (stmt.body, stmt.orelse)]
            if None in sides:
                return None
            ends = [bool(side) and isinstance(side[-1], ast.Continue) for side in (stmt.body, stmt.orelse)]
            open_sides = [s for s, end in zip(sides, ends, strict=True) if not end]
            known = set.intersection(*open_sides) if open_sides else set(bound)
        elif _grad_off(stmt):
            inner = _bound_before_read(stmt.body, bound, known)
            if inner is None:
                return None
            known = inner
        else:
            if _reads(stmt, bound) - known:
                return None
            known |= {n.id for n in walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return known


def _reads(node: ast.AST, names: set[str]) -> set[str]:
    """The names of `names` that `node` reads (an augmented assignment reads its target)."""
    loads = {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    updated = {
        n.target.id for n in walk(node) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
    }
    return (loads | updated) & names


def _operands(call: ast.Call) -> list[ast.expr]:
    receiver = [call.func.value] if isinstance(call.func, ast.Attribute) else []
    return [*receiver, *call.args]


def _fresh(body: list[ast.stmt], name: str) -> bool:
    """Every `=` that binds `name` in the body computes a new tensor (arithmetic), or passes the
    name's own value through a call (`h = dropout(h)`, `h = h.relu()`): an in-place update of it
    writes nothing the body did not make."""
    assigns = [
        n
        for s in body
        for n in walk(s)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]
    if not assigns or any(not isinstance(a.targets[0], ast.Name) for a in assigns):
        return False
    arithmetic = [a for a in assigns if isinstance(a.value, ast.BinOp | ast.UnaryOp)]
    passed = [
        a
        for a in assigns
        if isinstance(a.value, ast.Call)
        and any(isinstance(arg, ast.Name) and arg.id == name for arg in _operands(a.value))
    ]
    return bool(arithmetic) and len(arithmetic) + len(passed) == len(assigns)


def _accumulates(call: ast.Call, rows: set[str], bound: set[str]) -> bool:
    """`<acc>.index_add_(0, <row>, <values>)` into a name the body did not bind."""
    func = call.func
    return (
        func.attr == _IN_PLACE_ACC
        and isinstance(func.value, ast.Name)
        and func.value.id not in bound
        and len(call.args) == 3
        and not call.keywords
        and int_literal(call.args[0]) == 0
        and isinstance(call.args[1], ast.Name)
        and call.args[1].id in rows
    )


def _binds_again(body: list[ast.stmt], name: str) -> bool:
    count = 0
    for stmt in body:
        for node in walk(stmt):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                count += 1
    return count > 1


def _read(
    sf: SourceFile, node: ast.Name, rank: int, parents: dict[int, ast.AST], mask: str
) -> Edit | bool | None:
    """How a read of the index becomes a read of the int: an edit, True (reads the same), or None."""
    parent = parents.get(id(node))
    if not isinstance(node.ctx, ast.Load):
        return None
    if rank == 1:  # the index is `tensor([e])`
        if isinstance(parent, ast.Subscript) and parent.value is node and _first_of(parent, node.id):
            return sf.replace(parent, node.id)  # `index[0]` -> `index`
        if (
            isinstance(parent, ast.Subscript)
            and parent.slice is node
            and isinstance(parent.ctx, ast.Load)
            and isinstance(parent.value, ast.Name)
            and parent.value.id == mask
        ):
            return sf.replace(node, f"{node.id} : {node.id} + 1")  # `mask[index]` keeps its dim
        # anything else it indexes may be a module list (`self.experts[index]`, older Mixtral), where
        # a slice would be another list: no form reads the same from both
        return None
    if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Load):
        if parent.slice is node or (isinstance(parent.slice, ast.Tuple) and node in parent.slice.elts):
            return True  # an int indexes as a 0-d integer tensor does
    if isinstance(parent, ast.FormattedValue) and parent.conversion == -1 and parent.format_spec is None:
        return True  # `f"{index}"`: a 0-d tensor formats as its item
    if (
        isinstance(parent, ast.Compare)
        and len(parent.ops) == 1
        and isinstance(parent.ops[0], ast.Eq | ast.NotEq)
        and isinstance(parents.get(id(parent)), ast.If)
        and parents[id(parent)].test is parent
    ):
        return True  # `if index == n:` decides as the 0-d bool did
    return None


def _written(fn: ast.AST, name: str, first: int, last: int) -> bool:
    """Something on lines `first`..`last` writes into the tensor `name` holds: an item store, an
    augmented assignment or an in-place call (`name[3] = 1`, `name[0].fill_(1)`, `zero_(name)`)."""
    for node in walk(fn):
        if not first <= getattr(node, "lineno", 0) <= last:
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and _root(node) == name:
            return True
        if isinstance(node, ast.AugAssign) and _root(node.target) == name:
            return True
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called.endswith("_") and any(_root(o) == name for o in _operands(node)):
                return True
    return False


def _root(node: ast.AST) -> str | None:
    """`x` of `x`, `x[i]`, `x.a[i]`."""
    while isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _stored(body: list[ast.stmt]) -> set[str]:
    return {n.id for s in body for n in walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _read_outside(fn: ast.AST, loop: ast.For, index: str) -> bool:
    inside = {id(n) for s in loop.body for n in walk(s)} | {id(loop.target)}
    return any(isinstance(n, ast.Name) and n.id == index and id(n) not in inside for n in walk(fn))


# ---------------------------------------------------------------- small readers


def _straight(stmt: ast.stmt, fn: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """`stmt` runs whenever the function's body does: only `with` blocks stand around it."""
    node = parents.get(id(stmt))
    while node is not None and node is not fn:
        if not isinstance(node, ast.With):
            return False
        node = parents.get(id(node))
    return node is fn


def _bindings(fn: ast.AST, name: str) -> list[ast.Assign] | None:
    """Every statement that binds `name`, in line order; None where something else binds it too
    (a parameter, a loop, a tuple target, a `with ... as`)."""
    stores = sum(
        1 for n in walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
    )
    params = [a for a in walk(fn) if isinstance(a, ast.arg) and a.arg == name]
    statements = [
        n
        for n in walk(fn)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        if n.targets[0].id == name
    ]
    if params or len(statements) != stores:
        return None
    return sorted(statements, key=lambda s: (s.lineno, s.col_offset))


def _constant(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else ...
