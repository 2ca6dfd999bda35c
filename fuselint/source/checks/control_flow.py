"""FL102: Python control flow that depends on a tensor's values.

`if x.sum() > 0:`, `while err.max() > tol:`, `assert (p >= 0).all()`, `a if mask.any() else b`,
`self.training and torch.rand([]) < self.layerdrop` and `all(x < y for x, y in pairs)` all call
`bool()` on a tensor:
the value must reach the host before Python can pick a branch, so dynamo ends the graph
there (a "generic_jump" break) and the kernels on either side cannot fuse. Tests on
shapes, dtypes, `is None`, flags, `self.training` or Python numbers are host values and
are not flagged. Neither are tests on a parameter that is only guessed to be a tensor from
its name (`if not kv_caches:`, `if stride == 1:`, `if mode == Mode.FAST:`): an optional
argument tested for presence, or compared with an int, a string or an enum member, is a
host value far more often than a tensor, and a multi-element tensor could not be tested so.
A test that reads the tensor explicitly (`if bool(mask.all()):`, `if t.item() > 0:`) is
FL101's finding at the read: one finding per site.

The fix turns a branch that only picks one of two tensors into `torch.where`, which
computes both and selects per element, inside one graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace
from itertools import chain, count

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.break_fixes import (
    assert_instead_of_raise,
    block_of,
    drop_none_shortcut,
    fresh_name,
    spans_string,
    whole_lines,
)
from fuselint.source.checks import check
from fuselint.source.checks._shared import atom, finding, has_comment, one_row_read, spliced, torch_name
from fuselint.source.checks.dynamic_shapes import data_sized_roots
from fuselint.source.checks.stored_lambdas import stored_lambda_tests
from fuselint.source.count_branches import DataSized, count_branch_fix, describe_counts
from fuselint.source.count_pads import pad_fix, pads_to_count
from fuselint.source.dataflow import (
    BOOL,
    DIM,
    FIX_OPS,
    HOST,
    NUMPY,
    SCALAR,
    TENSORISH,
    TENSORS,
    TUPLE,
    Env,
    FunctionFlow,
    Site,
    describe,
    flows,
    narrowed_operands,
)
from fuselint.source.int_buffers import int_twin_fix
from fuselint.source.masked_writes import guarded_masked_store
from fuselint.source.module import SourceFile, newline_of
from fuselint.source.nodes import walk
from fuselint.source.paths import AFTER_FIX
from fuselint.source.scope import ModelFunction
from fuselint.source.sized_calls import file_sized

# Calls that turn a tensor into a Python value (so a test on them depends on tensor values).
# `.item()`, `.tolist()`, `bool(t)`, `int(t)` and `float(t)` are left to FL101, which reports the
# read itself; these are the reads FL101 does not report.
_SYNC_METHODS = frozenset({"equal", "allclose", "is_nonzero"})
_SYNC_TORCH = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero"})
_SYNC_BUILTINS = frozenset({"any", "all"})
# Calls with hidden effects (random state, in-place updates) that a branch must keep.
_RANDOM = frozenset({"rand", "randn", "rand_like", "randn_like", "randint", "bernoulli", "multinomial",
                     "dropout", "normal", "uniform_", "poisson", "randperm", "exponential_"})  # fmt: skip


def only_guessed(expr: ast.expr, flow: FunctionFlow, at: ast.AST) -> bool:
    """`expr` is a parameter taken for a tensor on its name alone, not rebound before `at`, or a
    name bound once to what is read off such a parameter (`FunctionFlow.read_off_guess`)."""
    if not (isinstance(expr, ast.Name) and expr.id in flow.guessed):
        return False
    if flow.assigned.get(expr.id) == 1:
        return True  # its one binding is the guess itself
    stores = (
        n
        for n in walk(flow.fn.node)
        if isinstance(n, ast.Name) and n.id == expr.id and isinstance(n.ctx, ast.Store)
    )
    return all(n.lineno >= at.lineno for n in stores)


def _host_operand(expr: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """A string, a number, None or an enum member (`Mode.FAST`, `cls.MODE`): no tensor."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and flow.kind(expr, env) is None:
        owner = expr.value.id
        return owner[:1].isupper() and not flow.imports.qualname(expr.value) and owner not in env
    return flow.kind(expr, env) in HOST or flow.kind(expr, env) == DIM


def _host_comparison(test: ast.Compare, flow: FunctionFlow, env: Env) -> bool:
    """Compares a string or an enum member, or a merely guessed parameter with host values only."""
    operands = [test.left, *test.comparators]
    if any(
        (isinstance(o, ast.Constant) and isinstance(o.value, str))
        or (isinstance(o, ast.Attribute) and _host_operand(o, flow, env) and not isinstance(o, ast.Constant))
        for o in operands
    ):
        return True  # a tensor is never equal to a string or an enum member: no tensor op here
    guessed = [o for o in operands if only_guessed(o, flow, test)]
    return bool(guessed) and all(o in guessed or _host_operand(o, flow, env) for o in operands)


def value_dependent(test: ast.expr, flow: FunctionFlow, env: Env) -> ast.expr | None:
    """The part of `test` whose truth depends on tensor values, or None when it is a host value."""
    if only_guessed(test, flow, test):
        return None  # `if kv_caches:` on an optional argument: a list or None far more often
    if isinstance(test, ast.Compare) and _host_comparison(test, flow, env):
        return None
    if isinstance(test, ast.BoolOp):
        stop = False if isinstance(test.op, ast.And) else True
        for value, inner in zip(test.values, narrowed_operands(test, env), strict=True):
            if flow.trace_truth(value) is stop:
                return None  # short-circuits while compiling: the rest is never evaluated
            found = value_dependent(value, flow, inner)
            if found is not None:
                return found
        return None
    if flow.kind(test, env) in (*TENSORS, NUMPY):
        return test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return value_dependent(test.operand, flow, env)
    if isinstance(test, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in test.ops):
            return None
        for operand in (test.left, *test.comparators):
            if _syncs(operand, flow, env):
                return test
        if _tuple_equality(test, flow, env):
            return test
        return None
    if _syncs(test, flow, env):
        return test
    return None


def _tuple_equality(test: ast.Compare, flow: FunctionFlow, env: Env) -> bool:
    """`pad == (0, 0)` where `pad` holds a tensor (`(max_pad_len, 0)`, `max_pad_len = lens.amax()`):
    Python compares the tuples element by element and must read `tensor == 0` on the host
    (x-transformers' `pad_at_dim`, gb6622 on torch 2.13)."""
    if not all(isinstance(op, (ast.Eq, ast.NotEq)) for op in test.ops):
        return False
    operands = (test.left, *test.comparators)
    kinds = [flow.kind(o, env) for o in operands]
    literal = any(
        isinstance(o, (ast.Tuple, ast.List)) and kind != TUPLE
        for o, kind in zip(operands, kinds, strict=True)
    )
    return literal and TUPLE in kinds


def _compares_on_host(call: ast.Call, flow: FunctionFlow, env: Env) -> bool:
    """`torch.equal(a, b)`, `a.allclose(b)`, `torch.is_nonzero(t)`: a Python bool read from tensors."""
    func = call.func
    qual = flow.imports.qualname(func)
    if qual is not None:
        return qual in _SYNC_TORCH
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _SYNC_METHODS
        and flow.kind(func.value, env) in TENSORISH
    )


def _syncs(expr: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """`expr` is a Python value computed from tensor values (`x.item()`, `torch.equal(a, b)`, `bool(t)`)."""
    if isinstance(expr, ast.Call):
        func = expr.func
        if flow.imports.qualname(func) is not None or isinstance(func, ast.Attribute):
            return _compares_on_host(expr, flow, env)
        if isinstance(func, ast.Name) and func.id in _SYNC_BUILTINS and expr.args:
            return flow.kind(expr.args[0], env) in TENSORS
        return False
    if isinstance(expr, ast.BinOp):
        return _syncs(expr.left, flow, env) or _syncs(expr.right, flow, env)
    if isinstance(expr, ast.UnaryOp):
        return _syncs(expr.operand, flow, env)
    if isinstance(expr, ast.Subscript):
        return _syncs(expr.value, flow, env)
    return False


def _pure(expr: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """Evaluating `expr` when its branch is not taken changes nothing (no module calls, no randomness)."""
    for node in walk(expr):
        if isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return False
        if isinstance(node, ast.Call):
            func = node.func
            qual = flow.imports.qualname(func)
            name = qual.rsplit(".", 1)[-1] if qual else (func.attr if isinstance(func, ast.Attribute) else "")
            if name.endswith("_") or name in _RANDOM or any(k.arg == "out" for k in node.keywords):
                return False
            if qual is not None:
                if not qual.startswith("torch.") or flow.kind(node, env) not in TENSORISH:
                    return False
            elif not (isinstance(func, ast.Attribute) and flow.kind(func.value, env) in TENSORS):
                return False
    return True


def _where(
    flow: FunctionFlow,
    sf: SourceFile,
    env: Env,
    test: ast.expr,
    a: ast.expr,
    b: ast.expr,
    keep: str | None = None,
) -> str | None:
    """`torch.where(test, a, b)` when that is a faithful rewrite, else None. `keep`: `b` is that
    name's value before the `if` (no text of its own in the source)."""
    if flow.kind(test, env) != BOOL:
        return None  # torch.where needs a boolean condition
    if not (flow.kind(a, env) in TENSORS or flow.kind(b, env) in TENSORS):
        return None
    if not all(_pure(e, flow, env) for e in (test, a, b)):
        return None
    numbers = _compared_with_ints(test)
    condition = _elementwise_test(sf, flow, env, test)
    left = _in_range(sf, flow, env, a, numbers)
    right = keep if keep is not None else _in_range(sf, flow, env, b, numbers)
    if left is None or right is None or condition is None:
        return None
    torch, _ = torch_name(sf)
    return f"{torch}.where({condition}, {left}, {right})"


def _elementwise_test(sf: SourceFile, flow: FunctionFlow, env: Env, test: ast.expr) -> str | None:
    """The test's text as a tensor condition: `a and b` reads `bool()` of a tensor operand, so it
    becomes `(a) & (b)` (`or`: `|`) when every operand is a comparison or a boolean tensor,
    whose `&` is the same truth value, evaluated without a jump (the operands are pure: `_where`
    checked). Any other `and`/`or` (an operand that is a number or an object): None."""
    if not isinstance(test, ast.BoolOp):
        return sf.segment(test)
    parts = []
    for value in test.values:
        if not (isinstance(value, ast.Compare) or flow.kind(value, env) == BOOL):
            return None
        part = _elementwise_test(sf, flow, env, value)
        if part is None:
            return None
        parts.append(f"({part})")
    return (" & " if isinstance(test.op, ast.And) else " | ").join(parts)


def _compared_with_ints(test: ast.expr) -> frozenset[str]:
    """Names the test shows to be integer indices, not masks: compared with an int literal
    (`prev_t >= 0`), or an int literal subtracted from them (`prev_t == t - 1`: subtracting from a
    bool tensor raises, so wherever the original runs, `t` is a number)."""
    names: set[str] = set()
    for node in walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.left, ast.Name):
            if _int_literal(node.right):
                names.add(node.left.id)
        if not isinstance(node, ast.Compare):
            continue
        if not all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        if any(_int_literal(o) for o in operands):
            names.update(o.id for o in operands if isinstance(o, ast.Name))
    return frozenset(names)


def _int_literal(part: ast.expr) -> bool:
    part = _unsigned(part)
    return isinstance(part, ast.Constant) and type(part.value) is int


def _unsigned(part: ast.expr) -> ast.expr:
    return part.operand if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.USub) else part


def _in_range(
    sf: SourceFile, flow: FunctionFlow, env: Env, expr: ast.expr, numbers: frozenset[str] = frozenset()
) -> str | None:
    """The text of a branch that `torch.where` evaluates on every call, or None when it may raise.

    A branch Python skipped may index out of range (`timesteps[index + 1]` at the last step).
    A constant index or a slice is kept. `X[j]` with `j` a tensor plus or minus an int is
    wrapped into range and read with `index_select`: the same values wherever the original
    indexed in range (what its branch, when taken, required), and no `.item()` for dynamo
    (a 0-d tensor index computed in the graph breaks it, gb0033). So is a bare `X[j]` where the
    test compares `j` with an int literal (`X[prev_t] if prev_t >= 0 else one`): the fix's message
    states the assumption that such a `j` is an integer index, not a mask. Any other index: None.
    """
    edits: list[tuple[ast.AST, str]] = []
    for node in walk(expr):
        if not isinstance(node, ast.Subscript):
            continue
        if _static_index(node):
            continue
        wrapped = _wrapped_index(sf, flow, env, node, numbers)
        if wrapped is None:
            return None
        edits.append((node, wrapped))
    return spliced(sf, expr, edits)


def _constant_index(part: ast.expr) -> bool:
    part = _unsigned(part)
    return isinstance(part, ast.Constant) and (
        part.value is None or part.value is Ellipsis or type(part.value) is int
    )


def _wrapped_index(
    sf: SourceFile, flow: FunctionFlow, env: Env, node: ast.Subscript, numbers: frozenset[str] = frozenset()
) -> str | None:
    """`X.index_select(0, (j % X.shape[0]).flatten()).reshape(j.shape + X.shape[1:])` for `X[j]`,
    `j` = a tensor plus or minus an int (an integer tensor, never a mask) or a tensor name the
    test compares with an int (`numbers`), `X` a tensor name."""
    index, base = node.slice, node.value
    chain = base
    while isinstance(chain, ast.Attribute):
        chain = chain.value
    if not isinstance(chain, ast.Name) or flow.kind(base, env) not in TENSORS:
        return None
    if isinstance(index, ast.Name) and index.id in numbers:
        if flow.kind(index, env) not in TENSORS:
            return None
    else:
        if not (isinstance(index, ast.BinOp) and isinstance(index.op, (ast.Add, ast.Sub))):
            return None
        ints = [isinstance(o, ast.Constant) and type(o.value) is int for o in (index.left, index.right)]
        tensor = index.right if ints[0] else index.left
        if ints.count(True) != 1 or flow.kind(tensor, env) not in TENSORS:
            return None
    if any(isinstance(n, (ast.Subscript, ast.Call)) for n in walk(index)):
        return None  # written twice below: only a cheap, plain index
    x, j = sf.segment(base), sf.segment(index)
    return f"{x}.index_select(0, (({j}) % {x}.shape[0]).flatten()).reshape(({j}).shape + {x}.shape[1:])"


def _assigned(block: list[ast.stmt]) -> list[tuple[str, ast.expr]] | None:
    """(name, value) of each statement of a block of plain `name = value` assignments, else None."""
    pairs = []
    for stmt in block:
        if not (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        ):
            return None
        pairs.append((stmt.targets[0].id, stmt.value))
    return pairs


def _if_fix(site: Site, flow: FunctionFlow, sf: SourceFile) -> Fix | None:
    """`if c: a = x; b = y` / `else: a = u; b = v` -> `a = torch.where(c, x, u)` then
    `b = torch.where(c, y, v)`: both branches assign the same names in the same order, so each
    `where` stands where both branches assigned that name. `if c:` runs only for a one-element `c`,
    so every element takes the same branch: a value reading a name assigned before it (`alpha =
    1 - beta`) reads that branch's own value, whole."""
    stmt = site.node
    if not isinstance(stmt, ast.If) or not stmt.body:
        return None
    then = _assigned(stmt.body)
    if not stmt.orelse and then is not None:
        # `x = 0` ... `if c: x = v`: the value before the `if` is the other branch's.
        if not all(_bound_before(flow, stmt, n) for n, _ in then):
            return None
        other = [(n, None) for n, _ in then]
    else:
        other = _assigned(stmt.orelse)
    if then is None or other is None or [n for n, _ in then] != [n for n, _ in other]:
        return None
    names = [n for n, _ in then]
    if len(set(names)) != len(names):
        return None
    if any(isinstance(n, ast.Name) and n.id in names for n in walk(stmt.test)):
        return None  # the test must read the same values for every `where`
    if has_comment(sf, stmt) or not sf.line_text(stmt.lineno)[stmt.col_offset :].startswith("if"):
        return None  # an `elif`, or a comment the rewrite would drop
    wheres = []
    for (name, a), (_, b) in zip(then, other, strict=True):
        kept = b is None
        if kept:  # the name as it stands before the `if`: a Name node at the test, read there
            b = ast.Name(name, ast.Load())
            ast.copy_location(b, stmt.test)
        where = _where(flow, sf, site.env, stmt.test, a, b, keep=name if kept else None)
        if where is None:
            return None
        wheres.append(f"{name} = {where}")
    first = sf.line_text(stmt.lineno)
    indent = first[: len(first) - len(first.lstrip())]
    branches = [e for pair in zip(then, other, strict=True) for _, e in pair if e is not None]
    edit = sf.replace(stmt, (newline_of(sf.text) + indent).join(wheres))
    return _fix(sf, edit, _reads_beside(sf, flow, stmt, branches))


DRAW_MESSAGE = (
    "run the branch on every call and keep its values with `torch.where` (unsafe: its random draw "
    "now happens also where the test fails, and those numbers are discarded: where the test fails "
    "only on a sampling loop's last step (`if t > 0:`), every output of the loop is unchanged and the "
    "generator, or torch's global one, ends one draw further on, so a caller that draws from it again "
    "after the loop gets other numbers; assumes the branch's calls change no other state and raise "
    "nothing where the test fails; the kept value is broadcast and promoted with the branch's)"
)


def _draws(node: ast.AST, flow: FunctionFlow) -> bool:
    """`node` calls a random function: torch's (`randn`, `rand_like`, ...) or a helper named like
    one (diffusers' `randn_tensor`)."""
    for call in walk(node):
        if isinstance(call, ast.Call):
            qual = flow.imports.qualname(call.func)
            name = (
                qual.rsplit(".", 1)[-1] if qual else getattr(call.func, "attr", getattr(call.func, "id", ""))
            )
            if name in _RANDOM or name.startswith(("randn_", "rand_")):
                return True
    return False


def _hoistable(block: list[ast.stmt], flow: FunctionFlow) -> list[ast.Assign] | None:
    """The assignments of a block made only of `name = value` statements, `if`s on host values
    holding such blocks, and `raise`: statements that set local names and nothing else (no
    attribute or item stores, no in-place `+=`, no calls for their effect, no return). Else None."""
    assigns: list[ast.Assign] = []
    for stmt in block:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            assigns.append(stmt)
        elif isinstance(stmt, ast.If):
            inner = [_hoistable(stmt.body, flow), _hoistable(stmt.orelse, flow)]
            if inner[0] is None or inner[1] is None:
                return None
            assigns += inner[0] + inner[1]
        elif not isinstance(stmt, ast.Raise):
            return None
    for node in (n for stmt in block for n in walk(stmt)):
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Yield, ast.YieldFrom, ast.Await)):
            return None
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.endswith("_") and not name.endswith("__") or any(k.arg == "out" for k in node.keywords):
                return None  # an in-place method or an `out=`: a write the skipped branch never made
    return assigns


def _draw_fix(site: Site, flow: FunctionFlow, sf: SourceFile) -> Fix | None:
    """`v = 0` ... `if <tensor test>: <body that draws noise and sets v>` becomes `v_kept = v`,
    the body on every call, then `v = torch.where(<test>, v, v_kept)` for each name the body
    sets that was bound before the `if` (DDPM's `if t > 0:` noise). The test is evaluated
    after the body, so the body may not set a name the test reads. Names only the body binds
    stay bound: the original raised NameError wherever it read one after a skipped branch."""
    stmt = site.node
    if not isinstance(stmt, ast.If) or stmt.orelse or not _draws(stmt, flow):
        return None
    if not sf.line_text(stmt.lineno)[stmt.col_offset :].startswith("if"):
        return None  # an `elif`
    if "#" in sf.line_text(stmt.lineno) or not whole_lines(sf, stmt):
        return None
    assigns = _hoistable(stmt.body, flow)
    if not assigns or flow.kind(stmt.test, site.env) != BOOL or not _pure(stmt.test, flow, site.env):
        return None
    condition = _elementwise_test(sf, flow, site.env, stmt.test)
    set_names = list(dict.fromkeys(t.id for a in assigns for t in a.targets))
    read = {n.id for n in walk(stmt.test) if isinstance(n, ast.Name)}
    if condition is None or read & set(set_names):
        return None
    kept = [n for n in set_names if _bound_before(flow, stmt, n)]
    if not kept:
        return None
    sites = {id(s.node): s for s in flow.of(ast.Assign)}
    for name in kept:
        values = [
            (a.value, sites[id(a)].env)
            for a in assigns
            if id(a) in sites
            and any(t.id == name for t in a.targets)
            and not (isinstance(a.value, ast.Name) and a.value.id == name)
        ]
        if not values or not all(flow.kind(v, env) in TENSORS for v, env in values):
            return None  # `torch.where` needs the branch's value to be a tensor
    body = "\n".join(sf.line_text(n) for n in range(stmt.body[0].lineno, stmt.body[-1].end_lineno + 1))
    if spans_string(body):
        return None
    first = sf.line_text(stmt.lineno)
    indent = first[: len(first) - len(first.lstrip())]
    inner = sf.line_text(stmt.body[0].lineno)
    step = len(inner) - len(inner.lstrip()) - len(indent)
    if step <= 0:
        return None
    moved = [line[step:] if line[:step].strip() == "" else None for line in body.split("\n")]
    if any(line is None for line in moved):
        return None
    torch, imports = torch_name(sf)
    names = {
        name: fresh_name(flow.fn.node, chain([f"{name}_kept"], (f"{name}_kept{n}" for n in count(2))))
        for name in kept
    }
    lines = [f"{indent}{names[n]} = {n}" for n in kept] + list(moved)
    lines += [f"{indent}{n} = {torch}.where({condition}, {n}, {names[n]})" for n in kept]
    content = newline_of(sf.text).join(lines)[len(indent) :]
    return Fix(Applicability.UNSAFE, DRAW_MESSAGE, (sf.replace(stmt, content),), imports)


EQUAL_MESSAGE = (
    "test the values first: `a if a != b and <test> else b` reads the tensor only where the two "
    "values differ (Euler's `gamma = min(s_churn / ..., ...) if s_tmin <= sigma <= s_tmax else 0.0` "
    "with the default `s_churn=0`); unsafe: where they compare equal, `b` is taken, which may differ "
    "from `a` in type (0 vs 0.0) or the sign of a zero, and `a` is computed also where the test "
    "fails (assumes it raises nothing there)"
)
_HOST_BUILTINS = frozenset({"min", "max", "abs", "round", "float", "int"})


def _host_value(expr: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """A Python number computed on the host without effects: literals, names the flow knows as
    host numbers, number parameters (`s_churn: float = 0.0`), config fields, arithmetic and
    `min`/`max`/`abs`/`round`/`float`/`int` of such, and `len(x)` (a tensor's length is a host
    number). An unknown name or attribute may be a tensor: `a != b` on it would read it."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Name):
        return flow.kind(expr, env) in (SCALAR, DIM) or _number_parameter(expr.id, flow)
    if isinstance(expr, ast.Attribute):
        return flow.host_number(expr, env)  # a known scalar or a config field
    if isinstance(expr, ast.UnaryOp):
        return _host_value(expr.operand, flow, env)
    if isinstance(expr, ast.BinOp):
        return _host_value(expr.left, flow, env) and _host_value(expr.right, flow, env)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.keywords:
        if expr.func.id == "len" and len(expr.args) == 1 and not isinstance(expr.args[0], ast.Starred):
            return all(not isinstance(n, ast.Call) for n in walk(expr.args[0]))
        return expr.func.id in _HOST_BUILTINS and all(_host_value(a, flow, env) for a in expr.args)
    return False


def _number_parameter(name: str, flow: FunctionFlow) -> bool:
    """A parameter annotated `int`/`float` or defaulting to a number literal (`s_churn=0.0`), and
    never rebound: a Python number (a tensor could be passed, but not by a caller the defaults and
    annotations describe)."""
    args = flow.fn.node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    for arg, default in pairs:
        if arg.arg != name or flow.assigned.get(name) != 1:
            continue
        annotated = arg.annotation is not None and ast.unparse(arg.annotation) in ("int", "float")
        number = isinstance(default, ast.Constant) and type(default.value) in (int, float)
        return annotated or number
    return False


def _equal_values_fix(site: Site, flow: FunctionFlow, sf: SourceFile) -> Fix | None:
    """`a if <tensor test> else b`, `a` and `b` host numbers -> `a if a != b and <test> else b`:
    where an option makes both values equal (`s_churn=0` turns Euler's churn off), Python no
    longer reads the tensor, so dynamo goes on; where they differ, the test runs as before."""
    node = site.node
    a, b, test = node.body, node.orelse, node.test
    if any(isinstance(n, ast.Name) and n.id in _HOST_BUILTINS | {"len"} and n.id in flow.assigned
           for n in walk(node)):  # fmt: skip
        return None  # `min` rebound in the function: not the builtin
    if not (_host_value(a, flow, site.env) and _host_value(b, flow, site.env)):
        return None
    if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
        return None  # two literals: their (in)equality is known, the test decides
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        first = test.values[0]
        if (
            isinstance(first, ast.Compare)
            and isinstance(first.ops[0], ast.NotEq)
            and sf.segment(first.left) == sf.segment(a)
        ):
            return None  # already rewritten
    guard = f"{atom(sf, a)} != {atom(sf, b)}"
    condition = sf.segment(test)
    if isinstance(test, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)) and not (
        isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
    ):
        condition = f"({condition})"
    content = f"{sf.segment(a)} if {guard} and {condition} else {sf.segment(b)}"
    return Fix(Applicability.UNSAFE, EQUAL_MESSAGE, (sf.replace(node, content),))


def _bound_before(flow: FunctionFlow, stmt: ast.If, name: str) -> bool:
    """`name` is assigned by a plain `name = ...` statement earlier in the block that holds `stmt`
    (so it is bound whenever the `if` runs), and not deleted in between."""
    block = block_of(flow.fn.node, stmt)
    if block is None:
        return False
    before = block[: next(i for i, s in enumerate(block) if s is stmt)]
    for earlier in reversed(before):
        if any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Del) for n in walk(earlier)
        ):
            return False
        if isinstance(earlier, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in earlier.targets
        ):
            return True
    return False


def _static_index(node: ast.Subscript) -> bool:
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return all(isinstance(p, ast.Slice) or _constant_index(p) for p in parts)


def _reads_beside(sf: SourceFile, flow: FunctionFlow, rewritten: ast.AST, branches: list[ast.expr]) -> list:
    """Edits for the function's other reads `X[t]`, `t` a tensor name, of a table `X` that a branch
    reads at a computed index (which `_wrapped_index` turns into an `index_select`): each becomes
    `X[torch.as_tensor(t, device=X.device).unsqueeze(0)][0]`, the same element as a copy.

    Beside the wrapped read, AOT (Inductor, the fuselint backend) lowers a plain `X[t]` of a 0-d
    tensor through `.item()` and refuses it, so the backend's compile fails and dynamo splits the
    graph there (gb0219; diffusers' DDPM `alphas_cumprod[t]` beside `alphas_cumprod[prev_t]`:
    bench/index_0d_probe.py); the eager backend never lowers, so dynamo alone shows no break.
    `torch.as_tensor` keeps a caller's Python int working."""
    bases = {
        sf.segment(n.value)
        for branch in branches
        for n in walk(branch)
        if isinstance(n, ast.Subscript) and not _static_index(n)
    }
    if not bases:
        return []
    inside = {id(n) for n in walk(rewritten)}
    torch, _ = torch_name(sf)
    edits = []
    for site in flow.of(ast.Subscript):
        sub = site.node
        if id(sub) in inside or not isinstance(sub.ctx, ast.Load) or not isinstance(sub.slice, ast.Name):
            continue
        kind = flow.kind(sub.slice, site.env)
        if kind not in TENSORS or kind == BOOL or sf.segment(sub.value) not in bases or has_comment(sf, sub):
            continue
        edits.append(sf.replace(sub, one_row_read(sf.segment(sub.value), sub.slice.id, torch)))
    return edits


def _fix(sf: SourceFile, edit, beside: list | tuple = ()) -> Fix:
    _, imports = torch_name(sf)
    also = (
        "; the function's other reads `X[t]` of such a table, `t` a tensor, become "
        "`X[torch.as_tensor(t, device=X.device).unsqueeze(0)][0]`, the same element as a copy (assumes `t` is "
        "an integer index and nothing writes through the result), which Inductor lowers without `.item()`"
        if beside
        else ""
    )
    return Fix(
        Applicability.UNSAFE,
        "select with `torch.where` (both branches are computed: assumes the branch Python skipped "
        "raises nothing and stays finite, since a NaN or inf there turns the gradient through `torch.where` "
        "into NaN; an index `X[j + k]` in it, or `X[j]` with `j` compared to a number or an int "
        f"subtracted from it in the test, is read wrapped into range, taking `j` as an integer index, not a mask{also})",
        (edit, *beside),
        imports,
    )


@check("FL102")
def data_dependent_control_flow(
    sf: SourceFile, functions: list[ModelFunction], rule: Rule
) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        found = list(_tests(sf, flow, rule))
        found += _count_tests(sf, functions, flow, rule, {f.span.line for f in found})
        yield from found
        yield from _host_comparisons(sf, flow, rule, {f.span.line for f in found})
    yield from stored_lambda_tests(sf, functions, rule)


def _count_tests(
    sf: SourceFile, functions: list[ModelFunction], flow: FunctionFlow, rule: Rule, flagged: set[int]
) -> list[Finding]:
    """`if len(idx) > limit:` where `idx` is sized by the data (`nonzero`, a mask read): once FL106's
    fix keeps that op in the graph, its count is an unbacked size and dynamo breaks at the test
    ("Could not guard on data-dependent expression", torch 2.13: kornia ALIKED, SOLD2, SIFT); before
    that fix it breaks at the op. `count_branches` says which side a guard takes."""
    sites = [s for s in flow.of(ast.If, ast.IfExp) if s.node.lineno not in flagged]
    if not sites:
        return []
    roots = data_sized_roots(sf, flow)
    across = file_sized(sf, flows(functions, sf.imports))
    params = across.params.get(id(flow.fn.node), {})
    returned = sorted(
        {
            callee.node.name
            for site in flow.of(ast.Call)
            if (callee := across.callees.get(id(site.node))) is not None
            and (id(callee.node) in across.returns or across.items.get(id(callee.node)))
        }
    )
    if not roots and FIX_OPS not in sf.text and not params and not returned:
        return []
    sized = across.sized(flow, roots)
    # Only the results of FL106's fixed ops (`_fuselint_...` calls, and what they size across calls): a
    # count sized by nothing else breaks at the op that sizes it, and here only once that op is fixed
    # (the next `--fix` round flags it normal).
    after_fix = across.sized(flow, roots, fixed_only=True)
    out = []
    for site in sites:
        counts, fix = count_branch_fix(sf, site.node, sized)
        if counts and pads_to_count(sf, site.node, sized):
            fix = pad_fix(sf, site.node, sized, flow.fn.node)  # no guard: it would crop or never pad
        if not counts or (params and _not_tensors_here(counts, params, flow, site.env)):
            continue
        path = site.path
        if path is None and not count_branch_fix(sf, site.node, after_fix)[0]:
            path = AFTER_FIX
        read = describe_counts(counts, sized)
        what = "counts of results" if ", " in read else "the count of a result"
        source = _sizing_calls(counts, sized, params, every=not roots) or (
            "a `nonzero` or mask read above"
            if roots or not returned
            else f"returned by `{'`, `'.join(returned)}`: a `nonzero` or mask read there"
        )
        message = (
            f"the test compares {read}, {what} sized by the data ({source}): "
            "dynamo breaks at that op, and once FL106's fix keeps it in the graph, here, since Python must "
            "know the count to pick a path (an unbacked size)"
        )
        out.append(finding(sf, rule, site.node.test, message, fix, path=path))
    return out


def _not_tensors_here(counts: list, params: dict, flow: FunctionFlow, env: Env) -> bool:
    """A counted parameter that the code shows is a tuple or a host value where it is tested (torch_geometric's
    `maybe_num_nodes` under `elif isinstance(edge_index, tuple):`, called with a tensor): that branch never
    runs for the call that sizes it."""
    return any(
        isinstance(node, ast.Name) and node.id in params and flow.kind(node, env) in (TUPLE, *HOST)
        for cmp, _, _ in counts
        for operand in (cmp.left, *cmp.comparators)
        for node in walk(operand)
    )


def _sizing_calls(counts: list, sized: DataSized, params: dict[str, tuple], every: bool) -> str:
    """Where the parameters a test counts come from: "`boxes`, `scores` as the call a → b → nms
    passes them (...)"; "" when the test counts none."""
    by_path: dict[tuple[str, ...], list[str]] = {}
    for cmp, _, _ in counts:
        for operand in (cmp.left, *cmp.comparators):
            if sized.count(operand) is None:
                continue
            for node in walk(operand):
                if isinstance(node, ast.Name) and node.id in params:
                    names = by_path.setdefault(params[node.id][1], [])
                    if f"`{node.id}`" not in names:
                        names.append(f"`{node.id}`")
    if not by_path and every:  # a count of a value made from them (`x = input.to(dtype)`), no op here
        for name, (_fixed, path, _source) in sorted(params.items()):
            by_path.setdefault(path, []).append(f"`{name}`")
    return "; ".join(
        f"{', '.join(names)} as the call {' → '.join(path)} passes them: a `nonzero` or mask read there"
        for path, names in by_path.items()
    )


def _host_comparisons(sf: SourceFile, flow: FunctionFlow, rule: Rule, flagged: set[int]) -> Iterable[Finding]:
    """`x1_eq_x2 = torch.equal(x1, x2)`: `torch.equal`, `allclose` and `is_nonzero` read the tensors
    where they are called, so dynamo breaks the graph on the call's line (gb0033, "Data dependent
    operator", torch 2.13), wherever the bool goes: a later `if` on it, or a generator inside a
    multi-line `all(...)` whose test is flagged on its first line (gpytorch's `Kernel.covar_dist`,
    `ExactGP.__call__`). A call on a line a test finding already names is that finding; one in a
    test that no finding names is not read while compiling (`if is_compiling() or torch.equal(a, b)`)."""
    unread = set()
    for site in flow.of(ast.If, ast.While, ast.Assert, ast.IfExp):
        test = site.node.test
        if not any(site.node.lineno <= line <= (test.end_lineno or test.lineno) for line in flagged):
            unread.update(id(n) for n in walk(test))
    for site in flow.of(ast.Call):
        if site.node.lineno in flagged or id(site.node) in unread:
            continue
        if not _compares_on_host(site.node, flow, site.env):
            continue
        flagged.add(site.node.lineno)
        message = (
            f"`{describe(site.node, 40)}` compares tensors on the host and gives a Python bool: dynamo "
            "breaks the graph at this call (gb0033), wherever the bool is used; compare as tensors "
            "(`(a == b).all()`, a tensor test) or decide outside the compiled code"
        )
        yield finding(sf, rule, site.node, message, path=site.path)


def _tests(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """Each test of a branch, loop, assert or comprehension `if` whose truth reads tensor values."""
    for site in flow.of(ast.If, ast.While, ast.Assert, ast.IfExp):
        node = site.node
        if isinstance(node, ast.Assert) and _plain_message(node):
            # dynamo turns `assert t` into torch._assert_async inside the graph: no break,
            # unless Python itself must read a tensor's truth first (`0 < t <= 1`, `a and b`)
            culprit = _truth_read_in_assert(node.test, flow, site.env)
        else:
            culprit = value_dependent(node.test, flow, site.env)
        if culprit is None:
            continue
        what = {
            ast.If: "`if`",
            ast.While: "`while`",
            ast.Assert: "`assert`",
            ast.IfExp: "conditional expression",
        }
        fix = None
        if isinstance(node, ast.If):
            fix = (
                int_twin_fix(sf, node.test)
                or _if_fix(site, flow, sf)
                or guarded_masked_store(sf, site, flow, lambda e, env=site.env: _pure(e, flow, env))
                or _draw_fix(site, flow, sf)
                or drop_none_shortcut(sf, site)
                or assert_instead_of_raise(sf, site, flow)
            )
        elif isinstance(node, ast.IfExp) and not has_comment(sf, node):
            where = _where(flow, sf, site.env, node.test, node.body, node.orelse)
            if where:
                fix = _fix(
                    sf, sf.replace(node, where), _reads_beside(sf, flow, node, [node.body, node.orelse])
                )
            else:
                fix = _equal_values_fix(site, flow, sf)
        # dynamo names the line where the culprit starts: a later line of a test that spans several
        # (`if (\n k == 0\n or n == 0\n):` breaks at `or n == 0`, torch 2.13)
        anchor = culprit if culprit.lineno != node.test.lineno else node.test
        found = finding(
            sf, rule, anchor, _message(what[type(node)], culprit, flow, site, rule), fix, path=site.path
        )
        yield replace(found, noqa_lines=_other_test_lines(node, anchor.lineno))
    for site in flow.of(ast.comprehension):
        # `[b for b, drop in zip(blocks, to_drop) if not drop]`: each `if` clause is a branch
        for test in site.node.ifs:
            culprit = value_dependent(test, flow, site.env)
            if culprit is not None:
                message = _message("comprehension `if`", culprit, flow, site, rule)
                yield finding(sf, rule, test, message, path=site.path)
    yield from _operand_jumps(sf, flow, rule)
    yield from _reduced_tests(sf, flow, rule)


def _reduced_tests(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """`all(x < y for x, y in zip(ts[:-1], ts[1:]))`: `all()` and `any()` call `bool()` on each
    element their comprehension makes, so a tensor test there reads the tensor on the host and
    breaks the graph at the call, wherever it stands (torchsde's `is_strictly_increasing`,
    gb0170). `all(t)` of a tensor itself is the test's finding (`_syncs`)."""
    for site in flow.of(ast.Call):
        call = site.node
        func = call.func
        if not (isinstance(func, ast.Name) and func.id in _SYNC_BUILTINS and len(call.args) == 1):
            continue
        comp = call.args[0]
        if not isinstance(comp, (ast.GeneratorExp, ast.ListComp)):
            continue
        inner = next((s.env for s in flow.of(type(comp.elt)) if s.node is comp.elt), None)
        culprit = value_dependent(comp.elt, flow, inner) if inner is not None else None
        if culprit is not None:
            message = _message(f"`{func.id}()` over a comprehension", culprit, flow, site, rule)
            yield finding(sf, rule, call, message, path=site.path)


def _other_test_lines(node: ast.If | ast.While | ast.IfExp | ast.Assert, line: int) -> tuple[int, ...]:
    """The lines from the statement's first to its test's last, besides `line`: a `# noqa` on any of
    them silences its finding (the finding stood on the first before it moved to the culprit's line)."""
    end = node.test.end_lineno or node.test.lineno
    return tuple(n for n in range(min(node.lineno, node.test.lineno), end + 1) if n != line)


def _message(what: str, culprit: ast.expr, flow: FunctionFlow, site: Site, rule: Rule) -> str:
    if _numpy_only(culprit, flow, site.env):
        return (
            f"{what} on a numpy value of Python numbers or of an object's arrays (`{describe(culprit, 40)}`): "
            "dynamo traces numpy as tensor ops, so the branch breaks the graph; compute it with `math` "
            "(a Python number), or once outside the compiled function"
        )
    return f"{what} on tensor values (`{describe(culprit, 40)}`) forces a host sync: {rule.message}"


def _numpy_only(expr: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """The test's tensor is a numpy value of host numbers or of an object's arrays, not a model tensor."""
    return flow.kind(expr, env) == NUMPY or (
        isinstance(expr, ast.UnaryOp) and flow.kind(expr.operand, env) == NUMPY
    )


def _operand_jumps(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """`pad = n % lcm != 0 and n > k` outside a test: `and`/`or` calls `bool()` on every operand
    but the last, so a tensor operand breaks the graph where it stands (reformer's forward).
    Operators inside a test are the test's finding; one finding per site."""
    inside: set[int] = set()
    for site in flow.of(ast.If, ast.While, ast.Assert):
        inside.update(id(n) for n in walk(site.node.test))
    for site in flow.of(ast.IfExp):
        inside.update(id(n) for n in walk(site.node.test))
    for site in flow.of(ast.BoolOp):
        inside.update(id(v) for v in site.node.values if isinstance(v, (ast.BoolOp, ast.Compare)))
    yield from _chained_jumps(sf, flow, rule, inside)
    for site in flow.of(ast.BoolOp):
        node = site.node
        if id(node) in inside:
            continue
        stop = isinstance(node.op, ast.Or)
        for value, inner in zip(node.values[:-1], narrowed_operands(node, site.env), strict=False):
            if flow.trace_truth(value) is stop:
                break  # short-circuits while compiling
            culprit = value_dependent(value, flow, inner)
            if culprit is not None:
                word = "`or`" if stop else "`and`"
                yield finding(sf, rule, value, _message(word, culprit, flow, site, rule), path=site.path)
                break


def _chained_jumps(sf: SourceFile, flow: FunctionFlow, rule: Rule, inside: set[int]) -> Iterable[Finding]:
    """`on_jump = t0 < t_jump < t0 + dt` outside a test: a chained comparison is `(a < b) and
    (b < c)`, so `bool()` runs on `a < b` (torchdiffeq's rk_common.py:302, gb0170)."""
    for site in flow.of(ast.Compare):
        node = site.node
        if id(node) in inside or len(node.ops) < 2 or isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            continue
        pair = (node.left, node.comparators[0])
        if any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in pair):
            continue
        if any(
            (flow.kind(o, site.env) in TENSORS and not only_guessed(o, flow, node))
            or _syncs(o, flow, site.env)
            for o in pair
        ):
            yield finding(
                sf, rule, node, _message("chained comparison", node, flow, site, rule), path=site.path
            )


def _truth_read_in_assert(test: ast.expr, flow: FunctionFlow, env: Env) -> ast.expr | None:
    """The part of an assert's test whose truth Python reads itself: an operand of `and` / `or`
    but the last, the operand of `not`, a chained comparison (its links are joined by jumps, and
    dynamo (torch 2.13) no longer sees an assert in them: `0 < n <= t` breaks too). Each breaks
    (gb0170) when it is a tensor; the value the assert finally tests may be one (`assert t`,
    `assert n > 0 and t`)."""
    if isinstance(test, ast.BoolOp):
        stop = not isinstance(test.op, ast.And)
        for value, inner in zip(test.values[:-1], narrowed_operands(test, env), strict=False):
            if flow.trace_truth(value) is stop:
                return None  # short-circuits while compiling: the rest is never evaluated
            found = value_dependent(value, flow, inner)
            if found is not None:
                return found
        return _truth_read_in_assert(test.values[-1], flow, narrowed_operands(test, env)[-1])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return value_dependent(test.operand, flow, env)
    if isinstance(test, ast.IfExp):
        # The body's jump leads to the end of the expression, not to the raise (the other arm's
        # code sits between), unless that arm is a false constant and compiles to nothing; the
        # other arm is what the assert finally tests (torch 2.13, Python 3.11). The test is an
        # `IfExp` site of its own.
        if flow.trace_truth(test.test) is False:
            return _truth_read_in_assert(test.orelse, flow, env)
        if isinstance(test.orelse, ast.Constant) and not test.orelse.value:
            found = _truth_read_in_assert(test.body, flow, env)
        else:
            found = value_dependent(test.body, flow, env)
        if found is not None or flow.trace_truth(test.test) is True:
            return found
        return _truth_read_in_assert(test.orelse, flow, env)
    if isinstance(test, ast.Compare) and len(test.ops) > 1:
        return value_dependent(test, flow, env)  # a tensor in any link: `0 < n <= t` breaks too
    return None


def _plain_message(node: ast.Assert) -> bool:
    """An assert with no message or a literal one: dynamo (torch 2.13) traces `assert t` on a
    tensor as `torch._assert_async(t)`; a message formatted at run time still breaks the graph."""
    return node.msg is None or isinstance(node.msg, ast.Constant)
