"""FL102's fix for a branch on the count of a data-sized result: decide it without a host read.

Once FL106's fix keeps `nonzero`, `x[mask]` or one-argument `torch.where` in the graph, the
result's length is an *unbacked* size: a symbol only the data decides. Python code that compares
it with a number (`if len(idx) > limit:`, `if scores.numel() == 0: return ...`, `if k > 0:` with
`k = min(n, idx.shape[0])`) makes dynamo guard on it, which it cannot do, so it breaks there
("Could not guard on data-dependent expression", torch 2.13: kornia ALIKED, SOLD2, SIFT's
top-k, the descriptor matcher). `min(n, idx.shape[0])` itself stays symbolic and does not break.

`torch.fx.experimental.symbolic_shapes.guard_or_false(c)` / `guard_or_true(c)` return the plain
bool in eager (so eager runs are unchanged) and, under compile, the comparison's value where the
size is known (a backed size: exact, with a guard) and the given side without a break where only
the data knows it (measured: `bench/fix12_count_probes.py`, `tests/source/test_count_branches.py` and the
fixtures `keypoint_limit.py`, `matches_or_empty.py` under `fixtures/breaks/`).
The fix wraps each comparison of a count in the one whose fallback is the general path:

- `n == 0`, `n <= 0`, `n < 1` fall back to False, `n > 0`, `n != 0`, `n >= 1` to True: the code
  for a non-empty result runs (assumes it gives the same on an empty one as the empty path);
- `n > limit`, `n >= limit` fall back to False, `n < limit`, `n <= limit` to True: the code for
  a count within the limit runs (assumes the count stays within it while compiling);
- the test of an `if` whose body only raises falls back to not raising (assumes the check holds;
  eager still checks it), and `a == b` / `a != b` of two counts assume they agree.

Unsafe: under compile, where the count is unbacked, one path runs for every input; the proof
(`--entry`) re-traces the fixed source and compares outputs. `torch.sym_min`/`sym_max` are not
needed (the builtins stay symbolic), `torch._check(a == b)` teaches the shape env an equality but
raises RuntimeError, not the code's own error, in eager; `torch.cond` keeps both paths exactly but
needs the branches as functions of tensors (NOTES, fix12).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fuselint.findings import Applicability, Fix
from fuselint.source.dataflow import FIX_OPS
from fuselint.source.module import SourceFile
from fuselint.source.nodes import walk
from fuselint.source.unbacked_ops import imports_torch_when_run

SYMBOLIC = "torch.fx.experimental.symbolic_shapes"
GUARDS = frozenset({"guard_or_false", "guard_or_true", "statically_known_true", "statically_known_false"})
_SIZE_METHODS = frozenset({"numel", "nelement"})
# Methods that keep the rows of a data-sized tensor (its count stays the data's).
_ROW_METHODS = frozenset(
    {"to", "float", "double", "half", "bfloat16", "long", "int", "bool", "clone", "detach", "contiguous",
     "flip", "abs", "neg", "unsqueeze", "view", "reshape", "expand", "t", "squeeze", "sort", "argsort",
     "cpu", "cuda", "type", "type_as", "view_as", "round", "floor", "ceil", "exp", "log", "sqrt",
     "masked_fill"}
)  # fmt: skip
_ROW_FUNCTIONS = frozenset(
    {"torch.stack", "torch.cat", "torch.sort", "torch.argsort", "torch.flip", "torch.clamp", "torch.clip",
     "torch.abs", "torch.floor", "torch.ceil", "torch.round", "torch.sqrt", "torch.exp", "torch.log"}
)  # fmt: skip


@dataclass(frozen=True)
class Items:
    """A tuple some of whose items hold rows sized by the data: (position, the line of the op they
    come from) pairs (a helper's `return best, frames, filled`, `sized_calls`)."""

    lines: tuple[tuple[int, int], ...]

    def at(self, position: int) -> int | None:
        return dict(self.lines).get(position)


@dataclass(frozen=True)
class Each:
    """A list (a comprehension) each of whose elements is `element`: data-sized rows (a line) or an
    `Items` tuple (kornia SIFT's `[self._process_octave(...) for i in range(n_oct)]`)."""

    element: int | Items


class DataSized:
    """Which expressions of one function hold a result sized by the data, and which numbers are
    its count. `roots`: ids of the ops FL106 flags there (and calls of FL106's fixed ops, and of
    helpers that return a data-sized value: `sized_calls`); `params`: the parameters a caller
    fills with rows sized by the data (`sized_calls`), whose count is their first dimension only
    (`boxes.shape[-1] != 4` checks a width the caller's code fixes); `items`: ids of calls of
    helpers that return a tuple with data-sized items, with those items' positions."""

    def __init__(
        self,
        fn: ast.AST,
        roots: set[int],
        sf: SourceFile,
        params: Mapping[str, int] | None = None,
        strict: bool = False,
        items: Mapping[int, frozenset[int]] | None = None,
    ) -> None:
        self.roots = roots
        self.items = items or {}
        self.sf = sf
        # the targets of the comprehension being read: name -> what it holds (None: nothing sized)
        self._scope: dict[str, int | Items | None] = {}
        # `x[i]` at a tensor or name `i` has `i`'s rows, not `x`'s (what crosses a call is read so)
        self.strict = strict
        # name -> its bindings in line order: (line, the line of the data-sized op it holds / the
        # value it counts, or None)
        self.names: dict[str, list[tuple[int, int | None, Branches]]] = {}
        self.counts: dict[str, list[tuple[int, Count | None, Branches]]] = {}
        self.structures: dict[str, list[tuple[int, Items | Each | None, Branches]]] = {}
        self.branches = _branches(fn)
        # A parameter is bound on the `def` line, above every use; its rows carry a negative number
        # in place of an op's line, one per source in the callers (`sized_calls`): two parameters
        # filled from one op have one count.
        line = getattr(fn, "lineno", 0)
        for name, source in sorted((params or {}).items()):
            self.names[name] = [(line, source, frozenset())]
        for stmt in sorted(
            (
                n
                for n in walk(fn)
                if isinstance(n, ast.Assign | ast.For | ast.AsyncFor)
                or (isinstance(n, ast.AnnAssign) and n.value)
            ),
            key=lambda n: (n.lineno, n.col_offset),
        ):
            if isinstance(stmt, ast.For | ast.AsyncFor):
                self._bind_loop(stmt)
            else:
                self._bind(stmt)

    def _bind_loop(self, stmt: ast.For | ast.AsyncFor) -> None:
        """A loop's target holds each element in turn, no data-sized rows, count or tuple of them."""
        where = self.branches.get(id(stmt), frozenset())
        for name in walk(stmt.target):
            if isinstance(name, ast.Name):
                for bindings in (self.names, self.counts, self.structures):
                    bindings.setdefault(name.id, []).append((stmt.lineno, None, where))

    def _bind(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        line = self.sized(stmt.value)
        counted = self.count(stmt.value)
        structure = self.structure(stmt.value) if line is None else None
        where = self.branches.get(id(stmt), frozenset())
        for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
            names = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
            for position, name in enumerate(names):
                if isinstance(name, ast.Name):
                    held = line
                    starred = any(isinstance(n, ast.Starred) for n in names[:position])
                    if held is None and len(names) > 1 and isinstance(structure, Items) and not starred:
                        held = structure.at(position)  # `best, frames, filled = helper(...)`
                    self.names.setdefault(name.id, []).append((stmt.lineno, held, where))
                    one = counted if len(names) == 1 and line is None else None
                    self.counts.setdefault(name.id, []).append((stmt.lineno, one, where))
                    kept = structure if len(names) == 1 else None
                    self.structures.setdefault(name.id, []).append((stmt.lineno, kept, where))

    def _latest(self, bindings: dict[str, list], name: ast.Name):
        """What `name` holds where it is used: the last binding above the use that can reach it (not
        one on a later line, an `else` below, nor one in the other branch of an `if` the use sits in:
        seamless_m4t's `hidden_states = repeat_interleave(...)` under `if`, then a test of
        `hidden_states.shape[0]` under its `else`). Where that binding sits in one arm of an `if`
        the use is not in, and the other arm binds the name too, the name holds either arm's value:
        the first data-sized one is taken (kornia SIFT's top-K under `if B == 1:` and its batched
        twin under `else:`), unless that arm binds the name again after it (outside a further `if`)."""
        here = self.branches.get(id(name), frozenset())
        reaching = [
            (value, where)
            for line, value, where in reversed(bindings.get(name.id, []))
            if line < name.lineno and not any((block, 1 - side) in here for block, side in where)
        ]
        if not reaching:
            return None
        value, where = reaching[0]
        arms = {(block, 1 - side) for block, side in where - here}
        if value is not None or not arms:
            return value
        for v, w in reaching[1:]:
            if w & arms and v is not None:
                return v
            if w - here == arms:  # the other arm's last binding outside a further `if`: it holds
                return None
        return None

    def _name(self, bindings: dict[str, list], name: ast.Name):
        if name.id in self._scope:  # a comprehension's target: rows or a tuple, never a count
            held = self._scope[name.id]
            if bindings is self.names:
                return held if isinstance(held, int) else None
            return held if bindings is self.structures and isinstance(held, Items) else None
        return self._latest(bindings, name)

    def structure(self, expr: ast.expr) -> Items | Each | None:
        """What a tuple or list `expr` holds, where some of its parts are data-sized: a call of a
        helper that returns such a tuple (`items`), a name bound to one, a comprehension of them."""
        if id(expr) in self.items:
            return Items(tuple((position, expr.lineno) for position in sorted(self.items[id(expr)])))
        if isinstance(expr, ast.Name):
            return self._name(self.structures, expr)
        if isinstance(expr, ast.ListComp | ast.GeneratorExp):
            element = self._element(expr)
            return Each(element) if element is not None else None
        return None

    def _element(self, comp: ast.ListComp | ast.GeneratorExp) -> int | Items | None:
        """What each element of a one-generator comprehension holds, its target bound to what the
        iterable's elements hold (`[r[0] for r in results]`)."""
        if len(comp.generators) != 1 or not isinstance(comp.generators[0].target, ast.Name):
            return None
        generator = comp.generators[0]
        iterated = self.structure(generator.iter)
        target = generator.target.id
        saved = self._scope.get(target, ...)
        self._scope[target] = iterated.element if isinstance(iterated, Each) else None
        try:
            element = self.sized(comp.elt)
            return element if element is not None else self._items(comp.elt)
        finally:
            if saved is ...:
                del self._scope[target]
            else:
                self._scope[target] = saved

    def _items(self, expr: ast.expr) -> Items | None:
        found = self.structure(expr)
        return found if isinstance(found, Items) else None

    def sized(self, expr: ast.expr) -> int | None:
        """The line of the data-sized op whose rows `expr` holds, else None."""
        if id(expr) in self.roots:
            return expr.lineno
        if isinstance(expr, ast.Name):
            return self._name(self.names, expr)
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name) and func.id.startswith(FIX_OPS):
                return expr.lineno
            if isinstance(func, ast.Attribute) and func.attr in _ROW_METHODS:
                return self.sized(func.value)
            if self.sf.imports.qualname(func) == "torch.arange" and len(expr.args) == 1:
                counted = self.count(expr.args[0])  # `torch.arange(idx.size(0))`: as many rows
                return counted.source if counted is not None else None
            if self.sf.imports.qualname(func) in _ROW_FUNCTIONS and expr.args:
                first = expr.args[0]
                if isinstance(
                    first, ast.ListComp | ast.GeneratorExp
                ):  # `torch.cat([r[0] for r in results], 1)`
                    element = self._element(first)
                    return element if isinstance(element, int) else None
                parts = first.elts if isinstance(first, ast.Tuple | ast.List) else [first]
                return next((line for p in parts if (line := self.sized(p)) is not None), None)
            return self._top_k(expr)
        if isinstance(expr, ast.Subscript) and _constant(expr.slice):
            items = self._items(expr.value)  # `r[0]` of a tuple a helper returns
            if items is not None and isinstance(expr.slice, ast.Constant):
                return items.at(expr.slice.value) if type(expr.slice.value) is int else None
        if isinstance(expr, ast.Subscript):
            # rows of a data-sized value, or any tensor read at a data-sized index tensor
            index = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            read_at = next(
                (line for p in index if not isinstance(p, ast.Slice) and (line := self.sized(p)) is not None),
                None,
            )
            if self.strict and any(not isinstance(p, ast.Slice) and not _constant(p) for p in index):
                return read_at  # `x[idx]` has as many rows as `idx` (kornia's `junctions[nms(...)]`)
            return self.sized(expr.value) or read_at
        if isinstance(expr, ast.BinOp):
            return self.sized(expr.left) or self.sized(expr.right)
        if isinstance(expr, ast.UnaryOp):
            return self.sized(expr.operand)
        return None

    def _top_k(self, call: ast.Call) -> int | None:
        """`torch.topk(x, k)` or `x.topk(k)` with a count for `k` (SIFT's `min(num_feats,
        nms_idx.shape[0])`): as many values and indices as the data has."""
        func = call.func
        if self.sf.imports.qualname(func) == "torch.topk":
            k = call.args[1] if len(call.args) > 1 else None
        elif (
            isinstance(func, ast.Attribute) and func.attr == "topk" and self.sf.imports.qualname(func) is None
        ):
            k = call.args[0] if call.args else None
        else:
            return None
        k = next((kw.value for kw in call.keywords if kw.arg == "k"), k)
        counted = self.count(k) if k is not None else None
        return counted.source if counted is not None else None

    def count(self, expr: ast.expr) -> Count | None:
        """What `expr` counts when it is the length of a data-sized value (`len(x)`, `x.shape[0]`,
        `x.size(0)`, `x.numel()`, a name bound to one, `min`/`max`/arithmetic of one), else None."""
        if isinstance(expr, ast.Name):
            return self._name(self.counts, expr)
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name) and func.id == "len" and len(expr.args) == 1:
                return self._counted(expr.args[0])
            if isinstance(func, ast.Name) and func.id in ("min", "max") and not expr.keywords:
                return next((c for a in expr.args if (c := self.count(a)) is not None), None)
            if isinstance(func, ast.Attribute) and func.attr in _SIZE_METHODS and not expr.args:
                return self._counted(func.value)
            if isinstance(func, ast.Attribute) and func.attr == "size" and len(expr.args) == 1:
                return self._counted(func.value, expr.args[0])
            return None
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute):
            if expr.value.attr == "shape":  # x.shape[0]
                return self._counted(expr.value.value, expr.slice)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Call):
            func = expr.value.func  # x.size()[0]
            if isinstance(func, ast.Attribute) and func.attr == "size" and not expr.value.args:
                return self._counted(func.value)
        if isinstance(expr, ast.BinOp):
            return self.count(expr.left) or self.count(expr.right)
        return None

    def _counted(self, value: ast.expr, dim: ast.expr | None = None) -> Count | None:
        line = self.sized(value)
        if line is None:
            return None
        if line < 0 and dim is not None and not _first(dim):
            return None  # a caller's rows: only their count is the data's
        return Count(self.sf.segment(value), line)


class Count(str):
    """What a count counts (`len(idx)` -> "idx"), with the line of the data-sized op it comes from
    (`source`; negative for a caller's, `DataSized.params`): two counts of one source are one size."""

    source: int

    def __new__(cls, text: str, source: int) -> Count:
        made = super().__new__(cls, text)
        made.source = source
        return made


def _constant(expr: ast.expr) -> bool:
    """`0`, `-1`, `None`, `...`: an index that reads no tensor."""
    if isinstance(expr, ast.UnaryOp):
        expr = expr.operand
    return isinstance(expr, ast.Constant)


def _first(dim: ast.expr) -> bool:
    """`0` (the rows' dimension)."""
    return isinstance(dim, ast.Constant) and type(dim.value) is int and dim.value == 0


# The `if` statements a node sits in, each with its side: (id of the `if`, 0 body / 1 else).
Branches = frozenset[tuple[int, int]]


def _branches(fn: ast.AST) -> dict[int, Branches]:
    """For each node of `fn`, the `if` branches it lies in."""
    out: dict[int, Branches] = {}
    todo: list[tuple[ast.AST, Branches]] = [(fn, frozenset())]
    while todo:
        node, inside = todo.pop()
        out[id(node)] = inside
        if isinstance(node, ast.If):
            todo.append((node.test, inside))
            todo.extend((child, inside | {(id(node), 0)}) for child in node.body)
            todo.extend((child, inside | {(id(node), 1)}) for child in node.orelse)
        else:
            todo.extend((child, inside) for child in ast.iter_child_nodes(node))
    return out


# ---------------------------------------------------------------- which side, and why


def _number(expr: ast.expr) -> int | float | None:
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return expr.value
    return None


_FLIPPED = {
    ast.Lt: ast.Gt,
    ast.Gt: ast.Lt,
    ast.LtE: ast.GtE,
    ast.GtE: ast.LtE,
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
}


def side(compare: ast.Compare, sized: DataSized, raises: bool) -> tuple[str, str] | None:
    """(the guard, the assumption it makes) for a comparison of a count with one other operand,
    else None (no count, a chain, or a comparison whose general path is not clear)."""
    if len(compare.ops) != 1:
        return None
    left, right, op = compare.left, compare.comparators[0], type(compare.ops[0])
    counted = sized.count(left)
    if counted is None:
        counted, left, right = sized.count(right), right, left
        op = _FLIPPED.get(op)
    if counted is None or op is None:
        return None
    other = sized.count(right)
    if other is not None and other.source == counted.source:
        return None  # one size (`x[m]` and a read at its rows): dynamo knows they agree
    if raises:
        return (
            "guard_or_false",
            f"assumes the check on the count of `{counted}` holds while compiling (eager still checks it)",
        )
    if sized.count(right) is not None:
        if op is ast.Eq:
            return "guard_or_true", f"assumes the counts of `{counted}` and `{sized.count(right)}` agree"
        if op is ast.NotEq:
            return "guard_or_false", f"assumes the counts of `{counted}` and `{sized.count(right)}` agree"
        return None
    empty = (
        f"assumes `{counted}` is not empty while compiling: the path for a non-empty one runs "
        "and must give what the empty path gives"
    )
    number = _number(right)
    if number == 0:
        if op in (ast.Eq, ast.LtE):
            return "guard_or_false", empty
        if op in (ast.Gt, ast.NotEq):
            return "guard_or_true", empty
        return None
    if number == 1 and op in (ast.Lt, ast.GtE):
        return ("guard_or_false" if op is ast.Lt else "guard_or_true"), empty
    if isinstance(left, ast.BinOp) or not _plain_limit(right):
        return None  # `i < len(ids) - 1`: an index against the count, no general path to name
    limit = f"assumes the count of `{counted}` stays within `{ast.unparse(right)}` while compiling"
    if op in (ast.Gt, ast.GtE):
        return "guard_or_false", limit
    if op in (ast.Lt, ast.LtE):
        return "guard_or_true", limit
    return None


def _plain_limit(expr: ast.expr) -> bool:
    """A number, a name or an attribute (`8000`, `group_size`, `self.n_limit`): a limit."""
    if isinstance(expr, ast.Constant):
        return type(expr.value) in (int, float)
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _raises_only(node: ast.If) -> bool:
    return not node.orelse and all(isinstance(s, ast.Raise) for s in node.body)


def _guarded(test: ast.expr) -> set[int]:
    """Comparisons already inside a guard call (a fixed file linted again)."""
    inside: set[int] = set()
    for call in walk(test):
        if isinstance(call, ast.Call):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in GUARDS:
                inside.update(id(n) for n in walk(call))
    return inside


def counted_comparisons(test: ast.expr, sized: DataSized, raises: bool) -> list[tuple[ast.Compare, str, str]]:
    """Each comparison of a count in `test` (not under a guard yet), with its guard and assumption;
    an empty list where some comparison of a count has no clear side (no fix then)."""
    guarded = _guarded(test)
    found: list[tuple[ast.Compare, str, str]] = []
    for node in walk(test):
        if not isinstance(node, ast.Compare) or id(node) in guarded:
            continue
        operands = [node.left, *node.comparators]
        if not any(sized.count(o) is not None for o in operands):
            continue
        chosen = side(node, sized, raises)
        if chosen is None:
            return []
        found.append((node, *chosen))
    return sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset))


def count_branch_fix(sf: SourceFile, node: ast.If | ast.IfExp, sized: DataSized) -> tuple[list, Fix | None]:
    """The counted comparisons of the test, and the fix that wraps each in its guard (None where
    the file cannot take the import, or binds the guard's name to something else)."""
    raises = isinstance(node, ast.If) and _raises_only(node)
    found = counted_comparisons(node.test, sized, raises)
    if not found:
        return [], None
    needed = sorted({guard for _, guard, _ in found})
    for guard in needed:
        if sf.imports.aliases.get(guard) != f"{SYMBOLIC}.{guard}" and _binds(sf.tree, guard):
            return found, None
    if not imports_torch_when_run(sf, "torch") and sf.imports.local_name_for("torch") is not None:
        return found, None
    edits = tuple(sf.replace(cmp, f"{guard}({sf.segment(cmp)})") for cmp, guard, _ in found)
    assumptions = "; ".join(dict.fromkeys(why for _, _, why in found))
    message = (
        f"decide it with `{'`/`'.join(needed)}` from `{SYMBOLIC}`: eager runs read the plain bool (unchanged); "
        f"under compile a size only the data knows takes the general path without a break ({assumptions}; "
        "and that what follows compiles with the size unknown: Inductor fails on kornia ALIKED's bmm, "
        "torch 2.13, so prove it with `--entry`)"
    )
    imports = tuple(f"from {SYMBOLIC} import {guard}" for guard in needed)
    return found, Fix(Applicability.UNSAFE, message, edits, imports)


def _binds(tree: ast.Module, name: str) -> bool:
    return any(
        (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name)
        or (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == name)
        or (isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name)
        for n in walk(tree)
    )


def describe_counts(found: Iterable[tuple[ast.Compare, str, str]], sized: DataSized) -> str:
    """The counts the comparisons read (`len(indices)`, `k_eff`), for the finding's message."""
    parts = [
        f"`{sized.sf.segment(operand)}`"
        for cmp, _, _ in found
        for operand in (cmp.left, *cmp.comparators)
        if sized.count(operand) is not None
    ]
    return ", ".join(dict.fromkeys(parts))
