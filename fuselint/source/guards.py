"""What a method's callers already know about `self`: a guard the callee's own check repeats.

A method that every in-scope caller runs only under ``if self.merged:`` starts, in real code, with
the check that makes it safe to call from anywhere else::

    def unmerge(self):
        if not self.merged:
            warnings.warn("Already unmerged. Nothing to do.")
            return
        ...

Under the compiled callers that branch never runs, so dynamo never traces it, and a finding in it
would name a break that cannot happen. :func:`site_facts` reads, at one call site, the truth of the
``self`` attributes the enclosing ``if`` tests state; :func:`dead_lines` gives the lines of the
callee's leading ``if`` statements that contradict what every site states.

Only plain tests count (``self.x``, ``not self.x``, and ``and`` of them), and only while nothing
between the test and the call can change the attribute: a call, an assignment to a ``self``
attribute, a loop or a ``with`` before the call in the guarded body drops what was known. A nested
``def`` knows nothing of the guards around it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

Fact = tuple[str, bool]  # (attribute of self, its truth)


def _facts_of(test: ast.expr) -> set[Fact] | None:
    """The facts a true `test` states, or None when it is not a plain test of `self` attributes."""
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
        return {(test.attr, True)}
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _facts_of(test.operand)
        if inner is not None and len(inner) == 1:
            ((attr, truth),) = inner
            return {(attr, not truth)}
        return None
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        facts: set[Fact] = set()
        for value in test.values:
            part = _facts_of(value)
            if part is None:
                return None
            facts |= part
        return facts
    return None


def _may_change_self(stmt: ast.stmt) -> bool:
    """Whether running `stmt` may change an attribute of `self`: it calls something or assigns one."""
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                return True
    return False


def _contains(stmt: ast.AST, target: ast.AST) -> bool:
    return any(node is target for node in ast.walk(stmt))


def site_facts(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> frozenset[Fact]:
    """What the ``if`` tests around `call` in `function` state about `self` when it runs."""
    return frozenset(_in_block(function.body, call, set()) or ())


def _in_block(body: Iterable[ast.stmt], call: ast.Call, known: set[Fact]) -> set[Fact] | None:
    """The facts at `call`, found in the statement list `body` entered with `known`; None when the
    call is not in `body`."""
    known = set(known)
    for stmt in body:
        if not _contains(stmt, call):
            if _may_change_self(stmt):
                known = set()
            continue
        if isinstance(stmt, ast.If) and not _contains(stmt.test, call):
            stated = _facts_of(stmt.test)
            if _in_any(stmt.body, call):
                return _in_block(stmt.body, call, known | (stated or set()))
            negated = _negation(stmt.test)
            return _in_block(stmt.orelse, call, known | (negated or set()))
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return set()
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            return set()  # a loop's earlier rounds, a context manager's enter: anything may have changed
        if isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                if _in_any(block, call):
                    return _in_block(block, call, known)
            return set()  # in a handler: the try body ran, partly
        return known  # the statement that makes the call
    return None


def _in_any(body: Iterable[ast.stmt], call: ast.Call) -> bool:
    return any(_contains(stmt, call) for stmt in body)


def _negation(test: ast.expr) -> set[Fact] | None:
    """The facts a false `test` states: only for a test of one attribute."""
    stated = _facts_of(test)
    if stated is None or len(stated) != 1:
        return None
    ((attr, truth),) = stated
    return {(attr, not truth)}


def common_facts(sites: Iterable[frozenset[Fact]]) -> frozenset[Fact]:
    """What every call site states (nothing, for no site)."""
    sites = list(sites)
    if not sites:
        return frozenset()
    common = set(sites[0])
    for facts in sites[1:]:
        common &= facts
    return frozenset(common)


def dead_lines(
    function: ast.FunctionDef | ast.AsyncFunctionDef, facts: frozenset[Fact]
) -> list[tuple[int, int]]:
    """Line ranges of `function`'s leading ``if`` statements whose test `facts` make false: their
    bodies never run. The leading statements are read while each is an ``if`` of a plain test (no
    call, nothing changed) that is false there; the first other statement ends the reading."""
    if not facts:
        return []
    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    dead = []
    for stmt in body:
        if not isinstance(stmt, ast.If) or stmt.orelse:
            break
        stated = _facts_of(stmt.test)
        if stated is None or not any((attr, not truth) in facts for attr, truth in stated):
            break
        dead.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
    return dead
