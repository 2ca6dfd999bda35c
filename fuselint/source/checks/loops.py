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
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import DIM, LIST, TENSORISH, TENSORS, FunctionFlow, Site, describe, flows
from fuselint.source.module import SourceFile
from fuselint.source.nodes import int_literal, walk
from fuselint.source.scope import ModelFunction


def _indexes_with(body: list[ast.stmt], name: str, flow: FunctionFlow, env) -> bool:
    """Some statement of the loop body indexes a tensor with the loop variable (`x[i]`, `out[:, i] =`)."""
    for stmt in body:
        for node in walk(stmt):
            if isinstance(node, ast.Subscript):
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if any(isinstance(p, ast.Name) and p.id == name for p in parts):
                    if flow.kind(node.value, env) in TENSORISH:
                        return True
    return False


def _picks_a_member(loop: ast.For, flow: FunctionFlow, env) -> bool:
    """`for i, codes_i in enumerate(codes): layer = self.layers[i]`: the index picks a member of a
    list the module holds (a layer per codebook, mimi's and encodec's residual quantizer decode),
    so the rows number the model's layers, a fixed count, and each row runs another layer: no
    batched op does the loop's work."""
    target = loop.target
    if not (isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name)):
        return False
    index = target.elts[0].id
    for stmt in loop.body:
        for node in walk(stmt):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Name)
                and node.slice.id == index
                and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "self"
                and flow.kind(node.value, env) not in TENSORISH
            ):
                return True
    return False


def _rows(expr: ast.expr, flow: FunctionFlow, env) -> bool:
    """`expr` is surely a tensor: a parameter only guessed to be one may as well be a list of them."""
    if flow.read_off_guess(expr):
        return False  # the guess itself, or an element or slice of it (`pathway[:-1]`)
    return flow.kind(expr, env) in TENSORS


def _host_list(expr: ast.expr, flow: FunctionFlow, env) -> bool:
    """`expr` is a Python list the code built or checked: `[None] * n`, `isinstance(x, list)`, or a
    name bound once to a list comprehension (`per_level = [t[i] for t in levels]`)."""
    if isinstance(expr, (ast.List, ast.ListComp)) or flow.kind(expr, env) == LIST:
        return True
    if not isinstance(expr, ast.Name) or flow.assigned.get(expr.id) != 1:
        return False
    return any(
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.ListComp)
        and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
        for node in walk(flow.fn.node)
    )


# Words in a size's name that say it grows with the input: a batch, a sequence, time.
_DATA_WORDS = ("seq", "batch", "bsz", "time", "frame", "token", "step", "length")
_DATA_LETTERS = frozenset({"B", "N", "T", "L", "S"})


def _shape_position(expr: ast.expr) -> int | None:
    """Which dim `x.shape[k]`, `x.size(k)` or `len(x)` reads (negative from the end), or None."""
    if (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Attribute)
        and expr.value.attr == "shape"
    ):
        return int_literal(expr.slice)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size":
        return int_literal(expr.args[0]) if len(expr.args) == 1 else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "len":
        return 0
    return None


def _unpacked_position(target: ast.Tuple | ast.List, name: str) -> int | None:
    """`b, n, c = x.shape` -> the index of `name`, counted from the end after a starred name."""
    names = target.elts
    star = next((i for i, e in enumerate(names) if isinstance(e, ast.Starred)), None)
    for index, element in enumerate(names):
        if isinstance(element, ast.Name) and element.id == name:
            return index if star is None or index < star else index - len(names)
    return None


def _dim_position(end: ast.expr, flow: FunctionFlow) -> int | None:
    """The dim of a tensor that a `range` end reads, following a name to its one binding."""
    if not isinstance(end, ast.Name):
        return _shape_position(end)
    bindings = [
        node
        for node in walk(flow.fn.node)
        if isinstance(node, ast.Assign)
        and any(end.id in {n.id for n in walk(t) if isinstance(n, ast.Name)} for t in node.targets)
    ]
    if len(bindings) != 1 or len(bindings[0].targets) != 1:
        return None
    target, value = bindings[0].targets[0], bindings[0].value
    if isinstance(target, ast.Name):
        return _shape_position(value)
    is_shape = (isinstance(value, ast.Attribute) and value.attr == "shape") or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size"
        and not value.args
    )  # fmt: skip
    if isinstance(target, (ast.Tuple, ast.List)) and is_shape:
        return _unpacked_position(target, end.id)
    return None


def _named_data_sized(end: ast.expr) -> bool:
    if not isinstance(end, ast.Name):
        return False
    if end.id in _DATA_LETTERS:
        return True
    return any(word.startswith(_DATA_WORDS) for word in end.id.lower().split("_"))


# Words in a dim-1 size's name that say it is the model's own: classes, channels, heads. In
# (N, C, ...) logits and NCHW maps dim 1 is fixed by the model, so a loop over it unrolls into the
# same graph at every batch size (smp's FocalLoss: one graph, 35 ops at batch 2 and 4).
_STATIC_WORDS = ("class", "cls", "channel", "chan", "head", "label")
_STATIC_LETTERS = frozenset({"C", "c"})


def _named_static(end: ast.expr) -> bool:
    if not isinstance(end, ast.Name):
        return False
    if end.id in _STATIC_LETTERS:
        return True
    return any(word.startswith(_STATIC_WORDS) for word in end.id.lower().split("_"))


def _data_sized(end: ast.expr, flow: FunctionFlow, index: ast.Name) -> bool:
    """A size read off a tensor that grows with the input: its batch (dim 0) or sequence (dim 1),
    or one whose name says batch, sequence or time; dim 1 named a class, channel or head count
    is the model's own, and so is dim 1 counted by a loop variable of that name
    (`for c in range(latents.size(1))`: LTX-2's per-channel AdaIN, 128 latent channels).
    A trailing dim (`ids.shape[-1]`: 3 rope axes) or a later one (`w.shape[2]`: a chunk of fixed
    length) is a small static size: dynamo unrolls the loop into the same few ops at every call
    (bench/precision_probes.py)."""
    position = _dim_position(end, flow)
    if _named_data_sized(end):
        return True
    if position == 1 and (_named_static(end) or _named_static(index)):
        return False  # a class or channel count (see _STATIC_WORDS)
    return position is None or position in (0, 1)


def _row_loop(site: Site, flow: FunctionFlow) -> str | None:
    loop = site.node
    iterable, env = loop.iter, site.env
    if _rows(iterable, flow, env):
        return f"`for ... in {describe(iterable, 30)}` iterates over a tensor's rows"
    if isinstance(iterable, ast.Call):
        func = iterable.func
        if isinstance(func, ast.Name) and func.id in ("enumerate", "zip", "reversed"):
            if func.id == "zip" and any(_host_list(arg, flow, env) for arg in iterable.args):
                return None  # zip stops at the end of the Python list: a fixed count
            if func.id == "enumerate" and _picks_a_member(loop, flow, env):
                return None  # one row per layer: the count is the model's own
            for arg in iterable.args:
                if _rows(arg, flow, env):
                    return f"`{func.id}({describe(arg, 30)})` iterates over a tensor's rows"
            return None
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "unbind"
            and flow.kind(func.value, env) in TENSORS
        ):
            dim = int_literal(iterable.args[0]) if iterable.args else 0
            if dim is None or dim in (0, 1):
                return f"`for ... in {describe(iterable, 30)}` iterates over a tensor's slices"
            return None
        if (
            isinstance(func, ast.Name)
            and func.id == "range"
            and iterable.args
            and isinstance(loop.target, ast.Name)
        ):
            end = iterable.args[0] if len(iterable.args) == 1 else iterable.args[1]
            if (
                flow.kind(end, env) == DIM
                and _data_sized(end, flow, loop.target)
                and _indexes_with(loop.body, loop.target.id, flow, env)
            ):
                return f"`range({describe(end, 30)})` runs once per row of a tensor"
    return None


def _row_comprehension(site: Site, flow: FunctionFlow) -> tuple[str, ast.expr] | None:
    """A comprehension whose first `for` iterates a tensor and whose element indexes a Python value
    (a list) with each element (`[rows[i] for i in keep]`): the list reads each 0-d tensor as an int
    (an `.item()` per element, gb0124). A comprehension that only unrolls over a tensor is left
    alone: the value annotated as a tensor is often a list of them (`[lvl[0] for lvl in levels]`)."""
    comp = site.node
    first = comp.generators[0]
    if not isinstance(first.target, ast.Name) or not _rows(first.iter, flow, site.env):
        return None
    indexed = [  # what the element indexes with each element of the iterated tensor
        node.value
        for node in walk(comp.value if isinstance(comp, ast.DictComp) else comp.elt)
        if isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Name)
        and node.slice.id == first.target.id
    ]
    for value in indexed:
        if flow.kind(value, site.env) not in TENSORISH:
            return (
                f"the comprehension over tensor `{describe(first.iter, 30)}` indexes "
                f"`{describe(value, 20)}` with each element (an `.item()` each)",
                first.iter,
            )
    # A tensor indexed with each element of a tensor the function computed (not a parameter,
    # which may be a list of tensors), `[perms[m] for m in min_idx]`: a 0-d element used as an
    # index is read on the host (gb0033, asteroid's PIT); a row element gives one advanced index
    # per row: the comprehension unrolls over the iterated tensor's rows either way.
    if isinstance(first.iter, ast.Name) and first.iter.id in flow.guessed:
        return None
    for value in indexed:
        if flow.kind(value, site.env) in TENSORS:
            return (
                f"the comprehension over tensor `{describe(first.iter, 30)}` indexes tensor "
                f"`{describe(value, 20)}` with each element (a 0-d element is read on the host)",
                first.iter,
            )
    return None


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@check("FL107")
def python_loop_over_tensor(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        for site in flow.of(ast.For):
            what = _row_loop(site, flow)
            if what is not None:
                loop = site.node
                yield finding(sf, rule, loop, f"{what}: {rule.message}", path=site.path, end=loop.iter)
        for site in flow.of(*_COMPREHENSIONS):
            found = _row_comprehension(site, flow)
            if found is not None:
                what, end = found
                yield finding(sf, rule, site.node, f"{what}: {rule.message}", path=site.path, end=end)
