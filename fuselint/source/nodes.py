"""Walking `ast` trees: `ast.walk` and `ast.iter_child_nodes`, the same nodes in the same order.

The checks walk functions and classes many times over, and the standard library's walk runs
two generators and a `getattr` per field for every node: on transformers/models it was about a
third of a cold lint. These read `_fields` in one loop and queue children in a list.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

_AST = ast.AST
T = TypeVar("T")

# `try` statements: `try ... except*` is a node kind of its own from Python 3.11.
TRIES: tuple[type, ...] = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def child_nodes(node: ast.AST) -> Sequence[ast.AST]:
    """The direct children of `node`, as `ast.iter_child_nodes` yields them. Within
    `remembered_walks` each node's are listed once and shared: a caller never changes them."""
    if _CHILDREN is None:
        return _children(node)
    found = _CHILDREN.get(node)
    if found is None:
        found = _CHILDREN[node] = _children(node)
    return found


# Fields that hold only identifiers, numbers, strings or constants (never a node or a list of
# nodes) in any node class `ast.parse` makes: `_children` skips them.
_PLAIN_FIELDS = frozenset(
    {
        "id",
        "attr",
        "arg",
        "name",
        "kind",
        "module",
        "level",
        "is_async",
        "type_comment",
        "asname",
        "conversion",
        "simple",
    }
)
# Per node class, the fields that may hold children: all but `_PLAIN_FIELDS` (and a constant's value).
_NODE_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}
if hasattr(ast, "TypeAlias"):  # Python 3.12's `type X = ...`: its `name` is a Name node
    _NODE_FIELDS[ast.TypeAlias] = tuple(ast.TypeAlias._fields)


def _children(node: ast.AST) -> tuple[ast.AST, ...]:
    fields = _NODE_FIELDS.get(type(node))
    if fields is None:
        fields = _NODE_FIELDS[type(node)] = tuple(f for f in node._fields if f not in _PLAIN_FIELDS)
    children: list[ast.AST] = []
    push = children.append
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, _AST):
            push(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, _AST):
                    push(item)
    return tuple(children)


# Within `remembered_walks`, by (what, node): the walk of each function, class and module (the
# checks walk the same methods and classes again and again: each attribute scan, each rule),
# and a module's statements (`imports.iter_statements`).
_REMEMBERED: dict[tuple[str, Hashable], Any] | None = None
# Within `remembered_walks`, each node's children: a method's nodes are walked for its module,
# its class and itself, and the checks' own walks (scopes, statements) list them again.
_CHILDREN: dict[ast.AST, tuple[ast.AST, ...]] | None = None
Memo = tuple[dict[tuple[str, Hashable], Any], dict[ast.AST, tuple[ast.AST, ...]]]
_BIG = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)


@contextmanager
def remembered_walks(kept: Memo | None = None):
    """Inside, a function's, class's or module's walk is made once and then replayed: for the
    analysis of one parsed file, which reads its tree and never changes it. `kept`: what an
    earlier analysis of the same tree remembered (`new_memo`), to go on from."""
    global _REMEMBERED, _CHILDREN
    outer = _REMEMBERED, _CHILDREN
    _REMEMBERED, _CHILDREN = kept if kept is not None else new_memo()
    try:
        yield
    finally:
        _REMEMBERED, _CHILDREN = outer


def new_memo() -> Memo:
    """An empty memo for `remembered_walks`."""
    return {}, {}


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` (itself first), breadth first, as `ast.walk` yields them.

    As in `ast.walk`, a node's children are queued before the node is yielded.
    """
    if isinstance(node, _BIG):
        if _REMEMBERED is None:
            return _walk(node)
        return iter(made_once("walk", node, _walk_list))
    return _walk(node)


def remembered(what: str, node: ast.AST, make: Callable[[ast.AST], Iterable[ast.AST]]) -> Iterator[ast.AST]:
    """`make(node)`, listed once per `remembered_walks` (and made every time outside one)."""
    if _REMEMBERED is None:
        return iter(make(node))
    return iter(made_once(what, node, lambda n: list(make(n))))


def made_once(what: str, key: Hashable, make: Callable[[Any], T]) -> T:
    """`make(key)`, made once per `remembered_walks` (and every time outside one): for a value
    read from the tree (`key` a node of it) that no check changes. Forgotten with the file's
    analysis, so that it holds no tree alive into the collector's next pass."""
    if _REMEMBERED is None:
        return make(key)
    found = _REMEMBERED.get((what, key))
    if found is None:
        found = _REMEMBERED[what, key] = make(key)
    return found


def grouped(node: ast.AST) -> dict[type, list[ast.AST]]:
    """The nodes of `walk(node)` by their exact type, each group in walk order: one pass that the
    class scans share (a method's stored names, assignments and calls), made once per
    `remembered_walks`."""
    return made_once("grouped", node, _grouped)


def _grouped(node: ast.AST) -> dict[type, list[ast.AST]]:
    groups: dict[type, list[ast.AST]] = {}
    for current in walk(node):
        found = groups.get(type(current))
        if found is None:
            groups[type(current)] = [current]
        else:
            found.append(current)
    return groups


def of_types(node: ast.AST, *kinds: type) -> list[ast.AST]:
    """The nodes of `walk(node)` of the exact `kinds`, group after group (walk order within each)."""
    groups = grouped(node)
    return [n for kind in kinds for n in groups.get(kind, ())]


def last_name(expr: ast.AST) -> str | None:
    """The last name of a plain or dotted name (`List` of `typing.List`), else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    return expr.attr if isinstance(expr, ast.Attribute) else None


def stored_names(node: ast.AST) -> set[str]:
    """The names `node` binds as `ast.Name` stores (targets, loop variables, walrus), nested
    scopes included: a copy, the caller's to keep."""
    return {n.id for n in grouped(node).get(ast.Name, ()) if isinstance(n.ctx, ast.Store)}


def _walk_list(node: ast.AST) -> list[ast.AST]:
    """`list(_walk(node))` within `remembered_walks`: the queue is the walk."""
    assert _CHILDREN is not None
    memo = _CHILDREN
    queue = [node]
    push = queue.extend
    for current in queue:
        found = memo.get(current)
        if found is None:
            found = memo[current] = _children(current)
        push(found)
    return queue


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    queue = [node]
    push = queue.extend
    memo = _CHILDREN  # `child_nodes`, inlined: a walk calls it once per node
    for current in queue:  # the loop reads what it appends: breadth first
        if memo is None:
            push(_children(current))
        else:
            found = memo.get(current)
            if found is None:
                found = memo[current] = _children(current)
            push(found)
        yield current


def self_attribute(expr: ast.expr | None) -> str | None:
    """`X` for `self.X`, else None."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def type_checking_only(stmt: ast.stmt) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): a block that never runs, only type checkers
    read it (its `else` runs). transformers' `import_utils.py` imports torch there."""
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
    return name == "TYPE_CHECKING"


def parent_map(fn: ast.AST) -> dict[int, ast.AST]:
    """id of each node under `fn` -> its parent node."""
    return {id(child): node for node in walk(fn) for child in child_nodes(node)}


def int_literal(node: ast.AST | None) -> int | None:
    """The value of an int literal, `-1` included (not a bool), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = int_literal(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None
