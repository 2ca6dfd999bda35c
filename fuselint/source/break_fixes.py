"""Fixes that remove a graph break at its root cause, each one checked against dynamo.

Every builder takes what a rule check already has (the parsed file and the flagged site) and
returns a `Fix`, or None where the rewrite could not be justified at that site. What each
rewrite does to the graph was measured with torch 2.13 (see `tests/source/test_break_fixes.py`
and the fixtures under `fixtures/breaks/`):

- a host side effect (print, a logger call, `warnings.warn`) under
  `if not torch.compiler.is_compiling():` is never traced: dynamo folds the test to False;
- `if not mask.any(): mask = None` reads a tensor value to pick a path; without the shortcut
  the masked path runs with an all-False mask and the graph goes on.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable

from fuselint.findings import Applicability, Edit, Fix
from fuselint.source.checks._shared import has_comment, torch_name
from fuselint.source.dataflow import TENSORS, FunctionFlow, Site
from fuselint.source.module import SourceFile, newline_of
from fuselint.source.nodes import child_nodes, walk

GUARD_MESSAGE = (
    "skip it while compiling with `if not torch.compiler.is_compiling():` "
    "(assumes the message is not needed in compiled runs: it is shown in eager runs only)"
)
SHORTCUT_MESSAGE = (
    "drop the shortcut and always take the masked path "
    "(assumes the code computes the same with an all-False mask as with None)"
)


# ---------------------------------------------------------------- what the fixes share


def fresh_name(fn: ast.AST, names: Iterable[str]) -> str:
    """The first of `names` that `fn` neither reads, binds nor takes as a parameter (a fix's
    temporary: `x_kept`, `kept`)."""
    used = {n.id for n in walk(fn) if isinstance(n, ast.Name)} | {
        a.arg for a in walk(fn) if isinstance(a, ast.arg)
    }
    return next(name for name in names if name not in used)


def whole_lines(sf: SourceFile, stmt: ast.stmt) -> bool:
    """`stmt` starts its first line and ends its last (a comment may follow): no `a; b`."""
    first = sf.line_text(stmt.lineno)
    before = first.encode("utf-8")[: stmt.col_offset].decode("utf-8", errors="replace")
    last = sf.line_text(stmt.end_lineno or stmt.lineno).encode("utf-8")
    after = last[stmt.end_col_offset or 0 :].decode("utf-8", errors="replace").strip()
    return before.strip() == "" and (after == "" or after.startswith("#"))


# ---------------------------------------------------------------- FL103: host side effects


def _indent_unit(indent: str) -> str:
    return "\t" if "\t" in indent else "    "


def spans_string(code: str) -> bool:
    """A string token over several lines (triple-quoted, or continued with a backslash):
    re-indenting its lines would change its text. Adjacent literals on separate lines
    (implicit concatenation) are separate tokens and move freely."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return True
    middle = getattr(tokenize, "FSTRING_MIDDLE", -1)  # Python 3.12+: an f-string's text pieces
    return any(
        (t.type == tokenize.STRING and t.end[0] > t.start[0]) or (t.type == middle and "\n" in t.string)
        for t in tokens
    )


def guard_side_effect(sf: SourceFile, site: Site) -> Fix | None:
    """Wrap the statement that is only the flagged call in `if not torch.compiler.is_compiling():`.

    Unsafe: the model's outputs are unchanged for every input, but the message is no longer
    printed, logged or warned in compiled runs (ruff calls a fix that removes output unsafe).
    """
    stmt = site.stmt
    if not (isinstance(stmt, ast.Expr) and stmt.value is site.node and whole_lines(sf, stmt)):
        return None  # the call's value is used (`x = warn(...)`) or shares its line
    first = sf.line_text(stmt.lineno)
    indent = first[: len(first) - len(first.lstrip())]
    unit = _indent_unit(indent)
    lines = sf.segment(stmt).split("\n")
    if len(lines) > 1 and not spans_string(sf.segment(stmt)):
        # Continuation lines sit inside the call's brackets: any indentation parses, so they
        # move with the call only where no string literal spans them.
        lines = [lines[0]] + [unit + line if line.strip() else line for line in lines[1:]]
    torch, imports = torch_name(sf)
    body = "\n".join(lines)
    newline = newline_of(sf.text)  # a CRLF file keeps CRLF
    content = f"if not {torch}.compiler.is_compiling():{newline}{indent}{unit}{body}"
    return Fix(Applicability.UNSAFE, GUARD_MESSAGE, (sf.replace(stmt, content),), imports)


# ---------------------------------------------------------------- FL102: `mask = None` shortcuts


def _any_of(sf: SourceFile, test: ast.expr) -> str | None:
    """The name in `not x.any()` or `not torch.any(x)`, else None."""
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
        return None
    call = test.operand
    if not isinstance(call, ast.Call) or call.keywords:
        return None
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "any" and not call.args:
        target = func.value
    elif isinstance(func, ast.Attribute) and func.attr == "any" and len(call.args) == 1:
        target = call.args[0]  # torch.any(x)
        if sf.imports.qualname(func) != "torch.any":
            return None
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


def block_of(tree: ast.AST, stmt: ast.stmt) -> list[ast.stmt] | None:
    """The statement list under `tree` (a body, `else` or `finally` block) that holds `stmt`."""
    for node in walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return block
    return None


def _alone_in_block(tree: ast.AST, stmt: ast.stmt) -> bool:
    block = block_of(tree, stmt)
    return block is None or len(block) == 1


def drop_none_shortcut(sf: SourceFile, site: Site) -> Fix | None:
    """Delete `if not mask.any(): mask = None` (nothing else in the `if`).

    Unsafe: it assumes that every later use of `mask` gives the same result for an all-False
    mask as for None (masked_fill of no position, a padding mask that pads nothing), which is
    what such a shortcut is written for; the masked path may cost a little more in eager runs.
    """
    stmt = site.node
    if not isinstance(stmt, ast.If) or stmt.orelse or len(stmt.body) != 1:
        return None
    name = _any_of(sf, stmt.test)
    then = stmt.body[0]
    if name is None or not isinstance(then, ast.Assign) or len(then.targets) != 1:
        return None
    target = then.targets[0]
    if not (isinstance(target, ast.Name) and target.id == name):
        return None
    if not (isinstance(then.value, ast.Constant) and then.value.value is None):
        return None
    if not sf.line_text(stmt.lineno)[: stmt.col_offset].strip() == "" or not whole_lines(sf, stmt):
        return None
    if not sf.line_text(stmt.lineno)[stmt.col_offset :].startswith("if"):
        return None  # an `elif`: deleting it would leave the chain broken
    if has_comment(sf, stmt):
        return None  # a comment the deletion would take with it
    if _alone_in_block(sf.tree, stmt):
        return None  # deleting it would leave an empty block
    edit: Edit = sf.delete_statement(stmt)
    return Fix(Applicability.UNSAFE, SHORTCUT_MESSAGE, (edit,))


# ---------------------------------------------------------------- FL102: `if <tensor test>: raise`

CHECK_MESSAGE = (
    "check it inside the graph with `torch._assert_async` "
    "(assumes callers do not catch the exception: a failed check raises RuntimeError, on CUDA asynchronously)"
)


def _message_only(sf: SourceFile, raise_: ast.Raise) -> str | None:
    """The text of `raise E("message")` or `raise E`, when nothing else is computed; else None."""
    exc = raise_.exc
    if raise_.cause is not None or exc is None:
        return None
    if isinstance(exc, ast.Name):
        return '""'
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and not exc.keywords):
        return None
    if not exc.args:
        return '""'
    if len(exc.args) == 1 and isinstance(exc.args[0], ast.Constant) and isinstance(exc.args[0].value, str):
        return sf.segment(exc.args[0])
    return None


def assert_instead_of_raise(sf: SourceFile, site: Site, flow: FunctionFlow) -> Fix | None:
    """`if <tensor test>: raise E("msg")` -> `torch._assert_async(<not test>, "msg")`.

    dynamo records `_assert_async` in the graph (no break); the `if` on a tensor ends it.
    Unsafe: the error type becomes RuntimeError (an `except ValueError:` would no longer catch
    it) and on CUDA it surfaces at the next synchronization. Only where the test (or what
    `not` negates) is surely a tensor, so that `torch.logical_not` and `_assert_async` apply.
    """
    stmt = site.node
    if not (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1):
        return None
    test = stmt.test
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if flow.kind(test.operand if negated else test, site.env) not in TENSORS:
        return None
    raise_ = stmt.body[0]
    message = _message_only(sf, raise_) if isinstance(raise_, ast.Raise) else None
    if message is None or not whole_lines(sf, stmt):
        return None
    if not sf.line_text(stmt.lineno)[stmt.col_offset :].startswith("if"):
        return None  # an `elif`
    if has_comment(sf, stmt):
        return None
    torch, imports = torch_name(sf)
    if negated:
        holds = sf.segment(test.operand)
    else:
        holds = f"{torch}.logical_not({sf.segment(test)})"
    content = f"{torch}._assert_async({holds}, {message})"
    return Fix(Applicability.UNSAFE, CHECK_MESSAGE, (sf.replace(stmt, content),), imports)


# ---------------------------------------------------------------- FL106: the first nonzero

FIRST_NONZERO_MESSAGE = (
    "take the first match with `torch.nonzero_static(x, size=1)`, which has a static shape "
    "(assumes some element is nonzero: with none, the original raises IndexError and this gives -1)"
)
_NONZERO = frozenset({"torch.nonzero", "torch.argwhere"})


def _nonzero_operand(sf: SourceFile, call: ast.Call) -> tuple[ast.expr, bool] | None:
    """(the tensor, as_tuple) of `x.nonzero(...)`, `torch.nonzero(x, ...)`, `x.argwhere()`,
    `torch.argwhere(x)` or one-argument `torch.where(x)` (a nonzero as a tuple); else None."""
    func = call.func
    qual = sf.imports.qualname(func)
    as_tuple: object = False
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords or set(keywords) - {"as_tuple"}:
        return None
    if "as_tuple" in keywords:
        flag = keywords["as_tuple"]
        if not (isinstance(flag, ast.Constant) and isinstance(flag.value, bool)):
            return None
        as_tuple = flag.value
    if qual == "torch.where" and len(call.args) == 1 and not keywords:
        return call.args[0], True
    if qual in _NONZERO and len(call.args) == 1:
        operand, name = call.args[0], qual.rsplit(".", 1)[1]
    elif qual is None and isinstance(func, ast.Attribute) and func.attr in ("nonzero", "argwhere"):
        if call.args:
            return None
        operand, name = func.value, func.attr
    else:
        return None
    if isinstance(operand, ast.Starred) or (name == "argwhere" and keywords):
        return None  # argwhere takes no as_tuple
    return operand, bool(as_tuple)


def _int_index(node: ast.AST, parent: ast.Subscript) -> int | None:
    part = parent.slice
    if parent.value is not node or not isinstance(parent.ctx, ast.Load):
        return None
    sign = 1
    if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.USub):
        part, sign = part.operand, -1
    if isinstance(part, ast.Constant) and type(part.value) is int:
        return sign * part.value
    return None


def _tensor_nonzero(sf: SourceFile, site: Site, flow: FunctionFlow) -> tuple[ast.expr, bool] | None:
    """(the tensor, as_tuple) of a nonzero call at `site` whose operand the code shows to be a
    tensor (not a parameter guessed from its name: numpy's `a.nonzero()` is a tuple); else None."""
    call = site.node
    if not isinstance(call, ast.Call):
        return None
    found = _nonzero_operand(sf, call)
    if found is None or flow.kind(found[0], site.env) not in TENSORS:
        return None
    tensors = [
        n
        for n in walk(found[0])
        if isinstance(n, (ast.Name, ast.Attribute)) and flow.kind(n, site.env) in TENSORS
    ]
    if tensors and all(isinstance(n, ast.Name) and n.id in flow.guessed for n in tensors):
        return None  # a tensor only by the guess on a parameter's name: it may be a numpy array
    return found


def first_nonzero(sf: SourceFile, site: Site, flow: FunctionFlow) -> Fix | None:
    """`x.nonzero()[0]` -> `torch.nonzero_static(x, size=1)[0]`, and
    `x.nonzero(as_tuple=True)[d][0]` (or `torch.where(x)[d][0]`) -> `torch.nonzero_static(x, size=1)[0, d]`.

    Only the first match is read, so a static buffer of one row holds it: the same row, in the
    same row-major order. dynamo traces `nonzero_static` with a static shape (no gb0036 break).
    Unsafe: where nothing matches, the original raises IndexError and the fix gives -1.
    Only on an operand the code shows to be a tensor (not a parameter guessed from its name):
    numpy's `a.nonzero()` is a tuple, so `a.nonzero()[0]` is every index along axis 0.
    """
    call = site.node
    found = _tensor_nonzero(sf, site, flow)
    if found is None:
        return None
    operand, as_tuple = found
    parents = {id(child): node for node in walk(site.stmt) for child in child_nodes(node)}
    outer = parents.get(id(call))
    if not isinstance(outer, ast.Subscript):
        return None
    first = _int_index(call, outer)
    if first is None:
        return None
    torch, imports = torch_name(sf)
    static = f"{torch}.nonzero_static({sf.segment(operand)}, size=1)"
    if not as_tuple:
        if first != 0:
            return None  # a later row: the static buffer would need more rows
        return Fix(Applicability.UNSAFE, FIRST_NONZERO_MESSAGE, (sf.replace(call, static),), imports)
    inner = parents.get(id(outer))
    if not isinstance(inner, ast.Subscript) or _int_index(outer, inner) != 0:
        return None
    content = f"{static}[0, {first}]"
    return Fix(Applicability.UNSAFE, FIRST_NONZERO_MESSAGE, (sf.replace(inner, content),), imports)


# ---------------------------------------------------------------- FL106: the second match, else the first

SECOND_MATCH_MESSAGE = (
    "read the second match if there is one, else the first, from "
    "`torch.nonzero_static(x, size=2, fill_value=-1)` with `torch.where`, which have static shapes "
    "(assumes some element matches: with none, the original raises IndexError and this gives -1, "
    "an index that reads the last element)"
)


def _counted(node: ast.AST, name: str) -> bool:
    """`len(name)`, the builtin."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == name
    )


def _module_binds(sf: SourceFile, name: str) -> bool:
    """The file binds `name` at module level (an import, a def, a class or an assignment)."""
    if name in sf.imports.aliases:
        return True
    for stmt in sf.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
            return True
        if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == name for n in walk(stmt)):
            return True
    return False


def _second_if_several(stmt: ast.stmt, name: str) -> str | None:
    """The target of `pos = 1 if len(name) > 1 else 0`, else None."""
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    ):
        return None
    value = stmt.value
    if not isinstance(value, ast.IfExp):
        return None
    test, body, orelse = value.test, value.body, value.orelse
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Gt)
        and _counted(test.left, name)
        and isinstance(test.comparators[0], ast.Constant)
        and type(test.comparators[0].value) is int
        and test.comparators[0].value == 1
    ):
        return None
    if not all(isinstance(c, ast.Constant) and type(c.value) is int for c in (body, orelse)):
        return None
    if (body.value, orelse.value) != (1, 0):
        return None
    return stmt.targets[0].id


def _nonzero_then(
    sf: SourceFile, site: Site, flow: FunctionFlow
) -> tuple[str, str, list[ast.stmt], int] | None:
    """(the operand's text, the name, its block, the index there) of `name = <tensor>.nonzero()`
    alone in its statement, in a function where `len` is the builtin; else None."""
    found = _tensor_nonzero(sf, site, flow)
    stmt = site.stmt
    if found is None or found[1] or not (isinstance(stmt, ast.Assign) and stmt.value is site.node):
        return None
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    if "len" in flow.assigned or _module_binds(sf, "len"):
        return None  # `len` is not the builtin
    block = block_of(flow.fn.node, stmt)
    if block is None:
        return None
    at = next(i for i, s in enumerate(block) if s is stmt)
    return sf.segment(found[0]), stmt.targets[0].id, block, at


def _counted_against(test: ast.expr, name: str, op: type, bound: int) -> bool:
    """`len(name) <op> bound`."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], op)
        and _counted(test.left, name)
        and isinstance(test.comparators[0], ast.Constant)
        and type(test.comparators[0].value) is int
        and test.comparators[0].value == bound
    )


def _assigns(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """(target, value) of `target = value` with one plain name; else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    return None


def _row_item(value: ast.expr, name: str, row: int) -> bool:
    """`name[row].item()`."""
    return (
        isinstance(value, ast.Call)
        and not value.args
        and not value.keywords
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "item"
        and isinstance(value.func.value, ast.Subscript)
        and isinstance(value.func.value.value, ast.Name)
        and value.func.value.value.id == name
        and isinstance(value.func.value.slice, ast.Constant)
        and type(value.func.value.slice.value) is int
        and value.func.value.slice.value == row
    )


def _host_int(node: ast.expr) -> bool:
    """An int literal, or `len(<names and attributes>)` plus or minus one: an int computed without
    a call that could do anything (`len` is checked to be the builtin by the caller)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _host_int(node.left) and _host_int(node.right)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"):
        return False
    if len(node.args) != 1 or node.keywords:
        return False
    chain = node.args[0]
    while isinstance(chain, ast.Attribute):
        chain = chain.value
    return isinstance(chain, ast.Name)


CANDIDATES_MESSAGE = (
    "read the second match if there is one, else the first, else the fallback, from "
    "`torch.nonzero_static(x, size=2, fill_value=-1)` with `torch.where`, which have static shapes: "
    "the same index for every input (assumes the fallback, `len(...)` of an attribute, can be computed "
    "on every call: it was computed only when nothing matched)"
)


def _candidates_or_fallback(
    sf: SourceFile, site: Site, flow: FunctionFlow, head: tuple[str, str, list[ast.stmt], int]
) -> Fix | None:
    """diffusers' DPM-Solver family (`index_for_timestep`, `_init_step_index`):

        index_candidates = (schedule == t).nonzero()
        if len(index_candidates) == 0:
            step_index = len(self.timesteps) - 1
        elif len(index_candidates) > 1:
            step_index = index_candidates[1].item()
        else:
            step_index = index_candidates[0].item()

    becomes `index_candidates = torch.nonzero_static(schedule == t, size=2, fill_value=-1)` and
    `step_index = torch.where(c[1] >= 0, c[1], torch.where(c[0] >= 0, c[0], <fallback>)).item()`:
    -1 is no index, so row 1 is a match exactly where there were several and row 0 where there was
    one; the fallback is an int, so `.item()` gives the int the chain gave. The comment lines inside
    the chain move above the new statement.
    """
    operand, name, block, at = head
    if at + 1 >= len(block) or flow.assigned.get(name) != 1 or flow.loaded.get(name) != 4:
        return None  # two `len`s and two rows: any other read would see the padded buffer
    chain = block[at + 1]
    if not (isinstance(chain, ast.If) and _counted_against(chain.test, name, ast.Eq, 0)):
        return None
    if len(chain.body) != 1 or len(chain.orelse) != 1 or not isinstance(chain.orelse[0], ast.If):
        return None
    inner = chain.orelse[0]
    if not _counted_against(inner.test, name, ast.Gt, 1) or len(inner.body) != 1 or len(inner.orelse) != 1:
        return None
    arms = [_assigns(chain.body[0]), _assigns(inner.body[0]), _assigns(inner.orelse[0])]
    if any(a is None for a in arms) or len({a[0] for a in arms}) != 1:
        return None
    target = arms[0][0]
    fallback, second, first = (a[1] for a in arms)
    if target == name or not (
        _host_int(fallback) and _row_item(second, name, 1) and _row_item(first, name, 0)
    ):
        return None
    if not whole_lines(sf, chain) or not sf.line_text(chain.lineno)[chain.col_offset :].startswith("if"):
        return None
    lines = [sf.line_text(n) for n in range(chain.lineno, (chain.end_lineno or chain.lineno) + 1)]
    comments = [line.strip() for line in lines if line.strip().startswith("#")]
    if sum("#" in line for line in lines) != len(comments):
        return None  # a comment after code, or a `#` in a string: not carried over here
    indent = sf.line_text(chain.lineno)[: chain.col_offset]
    torch, imports = torch_name(sf)
    newline = newline_of(sf.text)
    pick = (
        f"{target} = {torch}.where({name}[1] >= 0, {name}[1], "
        f"{torch}.where({name}[0] >= 0, {name}[0], {sf.segment(fallback)})).item()"
    )
    content = "".join(f"{c}{newline}{indent}" for c in comments) + pick
    edits = (
        sf.replace(site.node, f"{torch}.nonzero_static({operand}, size=2, fill_value=-1)"),
        sf.replace(chain, content),
    )
    return Fix(Applicability.UNSAFE, CANDIDATES_MESSAGE, edits, imports)


def second_match(sf: SourceFile, site: Site, flow: FunctionFlow) -> Fix | None:
    """diffusers' schedulers' `index_for_timestep`:

        indices = (schedule == t).nonzero()
        pos = 1 if len(indices) > 1 else 0
        ... indices[pos] ...

    becomes `indices = torch.nonzero_static(schedule == t, size=2, fill_value=-1)`, the `pos` line
    goes, and `indices[pos]` reads `torch.where(indices[1] >= 0, indices[1], indices[0])`. The
    static buffer holds the first two matches in the same row-major order and pads with -1, which
    no index equals, so the second row is a match exactly where `len(indices) > 1` held: the same
    row, of the same shape and dtype, for every input with a match. dynamo traces both ops with
    static shapes (no gb0036 break). Unsafe: with no match the original raises IndexError at
    `indices[0]`, and the fix gives -1.

    Only where nothing else reads or rebinds either name in the function (nested functions
    included), the `pos` line follows the nonzero's directly (comments between are kept) and the one
    read `indices[pos]` sits in a later statement of the same block. The form with a fallback for no
    match (`if len(c) == 0: ... elif len(c) > 1: ... else: ...`) is `_candidates_or_fallback`'s.
    """
    head = _nonzero_then(sf, site, flow)
    if head is None:
        return None
    operand, name, block, at = head
    if at + 2 > len(block):
        return _candidates_or_fallback(sf, site, flow, head)
    choice = block[at + 1]
    pos = _second_if_several(choice, name)
    if pos is None:
        return _candidates_or_fallback(sf, site, flow, head)
    if pos == name:
        return None
    if flow.assigned.get(name) != 1 or flow.assigned.get(pos) != 1:
        return None  # rebound (or a parameter) somewhere: the read may see another value
    if flow.loaded.get(name) != 2 or flow.loaded.get(pos) != 1:
        return None  # read elsewhere: those reads would see the padded buffer or no `pos`
    reads = [
        n
        for later in block[at + 2 :]
        for n in walk(later)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == name
        and isinstance(n.slice, ast.Name)
        and n.slice.id == pos
    ]
    if len(reads) != 1 or any(
        isinstance(n, (ast.Global, ast.Nonlocal, ast.Delete)) for n in walk(flow.fn.node)
    ):
        return None
    if not whole_lines(sf, choice) or has_comment(sf, choice):
        return None
    torch, imports = torch_name(sf)
    edits = (
        sf.replace(site.node, f"{torch}.nonzero_static({operand}, size=2, fill_value=-1)"),
        sf.delete_statement(choice),
        sf.replace(reads[0], f"{torch}.where({name}[1] >= 0, {name}[1], {name}[0])"),
    )
    return Fix(Applicability.UNSAFE, SECOND_MATCH_MESSAGE, edits, imports)


# ---------------------------------------------------------------- FL108: a comprehension's frame

TUPLE_MESSAGE = (
    "iterate a tuple of it: dynamo takes a tuple's iterator as the comprehension frame's input "
    "(assumes the iterable is a container that the comprehension does not change: `tuple(...)` "
    "reads every item before the first element is made)"
)


def iterate_a_tuple(sf: SourceFile, comp: ast.expr, bound: set[str]) -> Fix | None:
    """`{k: f(k) for k in flags}` -> `{k: f(k) for k in tuple(flags)}`: only the first iterable
    is the comprehension frame's input; a tuple's iterator is one dynamo can start a frame with."""
    iterable = comp.generators[0].iter
    if "tuple" in bound or "tuple" in sf.imports.aliases:
        return None
    text = sf.segment(iterable)
    edit = sf.replace(iterable, f"tuple({text})")
    return Fix(Applicability.UNSAFE, TUPLE_MESSAGE, (edit,))


# ---------------------------------------------------------------- FL108: a progress bar around a loop

BAR_MESSAGE = (
    "iterate the loop's iterable itself while compiling: `(it if torch.compiler.is_compiling() else bar)` "
    "(assumes the bar is not needed in compiled runs: it is shown in eager runs only; the loop sees the "
    "same items)"
)


def iterate_without_bar(sf: SourceFile, call: ast.Call, iterable: str) -> Fix | None:
    """`for t in self.progress_bar(ts):` -> `for t in (ts if torch.compiler.is_compiling() else
    self.progress_bar(ts)):`. dynamo folds the test to True, so it iterates `ts` and never calls
    the bar; eager runs take the bar as before. Only one of the two is evaluated."""
    if has_comment(sf, call):
        return None  # rewriting the call's lines would drop a comment
    torch, imports = torch_name(sf)
    text = f"({iterable} if {torch}.compiler.is_compiling() else {sf.segment(call)})"
    return Fix(Applicability.UNSAFE, BAR_MESSAGE, (sf.replace(call, text),), imports)


BAR_CONTEXT_MESSAGE = (
    "enter no bar while compiling: `with (contextlib.nullcontext() if torch.compiler.is_compiling() else "
    "bar) as b:`, each `b.update(...)` under `if not torch.compiler.is_compiling():` (assumes the bar is "
    "not needed in compiled runs: it is shown in eager runs only; the body runs as before)"
)


def enter_without_bar(sf: SourceFile, call: ast.Call, uses: list[ast.Expr]) -> Fix | None:
    """`with self.progress_bar(total=n) as bar:` -> `with (contextlib.nullcontext() if
    torch.compiler.is_compiling() else self.progress_bar(total=n)) as bar:`, and each statement
    `bar.update()` of its body guarded with `if not torch.compiler.is_compiling():`. dynamo folds
    both tests, so it enters a null context and never touches the bar; eager runs as before.
    `uses` are the only statements that read the bar's name (the caller checks)."""
    if "contextlib" in sf.imports.aliases and sf.imports.aliases["contextlib"] != "contextlib":
        return None  # `contextlib` names something else here
    if any(has_comment(sf, node) for node in (call, *uses)):
        return None  # rewriting these lines would drop a comment
    if any(not whole_lines(sf, stmt) or (stmt.end_lineno or stmt.lineno) != stmt.lineno for stmt in uses):
        return None
    torch, imports = torch_name(sf)
    newline = newline_of(sf.text)
    edits = [
        sf.replace(
            call, f"(contextlib.nullcontext() if {torch}.compiler.is_compiling() else {sf.segment(call)})"
        )
    ]
    for stmt in uses:
        first = sf.line_text(stmt.lineno)
        indent = first[: len(first) - len(first.lstrip())]
        guard = f"if not {torch}.compiler.is_compiling():{newline}{indent}{_indent_unit(indent)}{sf.segment(stmt)}"
        edits.append(sf.replace(stmt, guard))
    if "contextlib" not in sf.imports.aliases:
        imports = (*imports, "import contextlib")
    return Fix(Applicability.UNSAFE, BAR_CONTEXT_MESSAGE, tuple(edits), imports)
