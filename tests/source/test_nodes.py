"""`nodes.walk` and `nodes.child_nodes` give what `ast.walk` and `ast.iter_child_nodes` give."""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from fuselint.source.nodes import child_nodes, walk

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# Fields holding strings in lists (Global.names, MatchClass.kwd_attrs), None among nodes
# (a dict's `**` key), optional fields left None (`returns`) and shared context nodes.
ODD = textwrap.dedent(
    """
    def f(x, *a, y=1, **k) -> None:
        global g
        d = {**x, "k": [i async for i in a]}
        match x:
            case P(a=1, b=[_, *rest]) | {"k": v}:
                del d[x:1, ...]
        return lambda: (yield from f"{x!r:>{y}}")
    """
)


# Every field `_children` skips as never holding a node (names, modules, levels, a constant's
# value and kind, a conversion, `simple`, `is_async`, a type comment) beside nodes that have them.
PLAIN = textwrap.dedent(
    """
    from ..pkg import mod as m, other
    import a.b as c
    x: int = u"s" + f"{m!r}" + b"b"
    (y) = 3.5
    async def g(p, /, q: "T" = None, *, r, **kw):  # type: ignore
        async for i in p:
            pass
        async with q as (s, t):
            z = [j async for j in p if (w := j)]
        try:
            p.attr(key=1, **kw)
        except (E, F) as err:
            nonlocal_ = err
        match p:
            case [1, *others] | {"k": 1, **more} as whole:
                pass
            case C(1, key=v):
                pass
    """
)


def _trees() -> list[ast.AST]:
    trees = [ast.parse(ODD), ast.parse(PLAIN, type_comments=True)]
    trees += [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.rglob("*.py"))[:40]]
    return trees


def test_walk_yields_the_same_nodes_in_the_same_order():
    for tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.stmt, ast.expr)):
                assert list(walk(node)) == list(ast.walk(node))


def test_child_nodes_are_the_standard_children():
    for tree in _trees():
        for node in ast.walk(tree):
            assert list(child_nodes(node)) == list(ast.iter_child_nodes(node))


def test_children_skip_only_fields_that_hold_no_node():
    # `_children` reads only the fields outside `_PLAIN_FIELDS`: every node kind above, parsed,
    # holds no node (nor a list with one) in a field it skips.
    from fuselint.source import nodes

    kinds = set()
    for tree in _trees():
        for node in ast.walk(tree):
            kinds.add(type(node))
            for name, value in ast.iter_fields(node):
                if name in nodes._PLAIN_FIELDS or isinstance(node, ast.Constant):
                    items = value if isinstance(value, list) else [value]
                    assert not any(isinstance(v, ast.AST) for v in items), (type(node), name)
    assert {ast.alias, ast.ImportFrom, ast.keyword, ast.ExceptHandler, ast.MatchAs, ast.MatchStar,
            ast.FormattedValue, ast.comprehension, ast.AnnAssign, ast.MatchMapping, ast.arg} <= kinds  # fmt: skip


def test_within_remembered_walks_children_are_listed_once_and_walks_match_the_standard_ones():
    from fuselint.source import nodes

    for tree in _trees():
        with nodes.remembered_walks():
            # Statements first, so that the module's walk below reads children listed by others.
            for node in ast.walk(tree):
                if isinstance(node, ast.stmt):
                    assert list(walk(node)) == list(ast.walk(node))
            assert list(walk(tree)) == list(ast.walk(tree))
            for node in ast.walk(tree):
                first = child_nodes(node)
                assert list(first) == list(ast.iter_child_nodes(node))
                assert child_nodes(node) is first and isinstance(first, tuple)
        assert nodes._CHILDREN is None


def test_walk_queues_children_before_yielding():
    # A caller that rewrites a node's fields while walking still sees the old children, as with ast.walk.
    tree = ast.parse("a = b + c")
    seen = []
    for node in walk(tree):
        seen.append(type(node).__name__)
        if isinstance(node, ast.Assign):
            node.value = ast.Constant(1)
    assert "BinOp" in seen and "Constant" not in seen


SCOPES = textwrap.dedent(
    """
    def f():
        global a
        if x:
            nonlocal b
        try:
            pass
        except E:
            global c
        finally:
            with m:
                global d
        match x:
            case 1:
                global e
        def inner():
            global not_f
        class C:
            global not_f_either
            class D:
                pass
    """
)


def _declared(nodes) -> set[str]:
    return {n for node in nodes if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}


def test_scope_statements_find_the_globals_the_full_scope_walk_finds():
    from fuselint.source.patterns_lower import _scope_statements, _walk_scope

    function = ast.parse(SCOPES).body[0]
    assert _declared(_scope_statements(function)) == {"a", "b", "c", "d", "e"}
    for tree in [*_trees(), ast.parse(SCOPES)]:
        for stmt in (n for n in ast.walk(tree) if isinstance(n, ast.stmt)):
            assert _declared(_scope_statements(stmt)) == _declared(_walk_scope(stmt))


def test_iter_statements_finds_every_class():
    from fuselint.source.imports import iter_statements

    for tree in [*_trees(), ast.parse(SCOPES)]:
        classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        assert {id(n) for n in iter_statements(tree) if isinstance(n, ast.ClassDef)} == {
            id(n) for n in classes
        }


def test_a_remembered_walk_replays_the_same_nodes_and_is_forgotten_after():
    from fuselint.source import nodes

    tree = ast.parse(ODD)
    function = tree.body[0]
    with nodes.remembered_walks():
        first = list(walk(function))
        assert list(walk(function)) == first == list(ast.walk(function))
        assert list(walk(tree)) == list(ast.walk(tree))
        assert ("walk", function) in nodes._REMEMBERED
        # Expressions are walked afresh each time (they are small, and built nodes come and go).
        assert list(walk(function.body[1])) == list(ast.walk(function.body[1]))
        assert ("walk", function.body[1]) not in nodes._REMEMBERED
    assert nodes._REMEMBERED is None


def test_a_modules_statements_are_remembered_in_the_same_order():
    from fuselint.source import nodes
    from fuselint.source.imports import iter_statements

    tree = ast.parse(SCOPES)
    fresh = list(iter_statements(tree))
    with nodes.remembered_walks():
        assert list(iter_statements(tree)) == fresh
        assert list(iter_statements(tree)) == fresh
        assert ("statements", tree) in nodes._REMEMBERED


def test_a_value_made_once_is_made_once_per_remembered_walks():
    from fuselint.source import nodes

    tree = ast.parse(ODD)
    made = []

    def make(node):
        made.append(node)
        return len(made)

    assert nodes.made_once("count", tree, make) == 1
    assert nodes.made_once("count", tree, make) == 2  # outside: made every time
    with nodes.remembered_walks():
        assert nodes.made_once("count", tree, make) == 3
        assert nodes.made_once("count", tree, make) == 3
        assert nodes.made_once("other", tree, make) == 4
    assert nodes.made_once("count", tree, make) == 5


def _owners_by_ancestry(tree: ast.AST) -> dict:
    """Each node's innermost class, function (inside that class) and statement, read up its
    ancestors; nodes that CPython shares between parents (`ast.Load()`, `ast.Add()`) are left out."""
    edges = [(id(c), p) for p in ast.walk(tree) for c in ast.iter_child_nodes(p)]
    parents = dict(edges)
    shared = {k for k, n in Counter(k for k, _ in edges).items() if n > 1}
    owners = {}
    for node in ast.walk(tree):
        if node is tree or id(node) in shared:
            continue
        chain = [node]
        while id(chain[-1]) in parents:
            chain.append(parents[id(chain[-1])])
        cls = next((n for n in chain if isinstance(n, ast.ClassDef)), None)
        inside = chain[: chain.index(cls)] if cls is not None else chain
        fn = next((n for n in inside if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        owners[id(node)] = (cls, fn, next((n for n in chain if isinstance(n, ast.stmt)), None))
    return owners


def test_owners_name_each_nodes_innermost_class_function_and_statement():
    from fuselint.source.int_buffers import _owners

    for tree in [*_trees(), ast.parse(SCOPES)]:
        found = _owners(tree)
        assert {k: found[k] for k in _owners_by_ancestry(tree)} == _owners_by_ancestry(tree)
    cls = ast.parse(SCOPES).body[0].body[-1]
    inner = cls.body[-1]
    owners = _owners(ast.Module(body=[cls], type_ignores=[]))
    assert owners[id(inner.body[0])] == (inner, None, inner.body[0])


def test_an_if_tests_class_by_lines_is_its_owning_class():
    from fuselint.source.int_buffers import _enclosing_class
    from fuselint.source.module import SourceFile

    nested = "class A:\n    def f(self):\n        class B:\n            if x:\n                pass\n        if y:\n            pass\n"
    for text in [
        ODD,
        SCOPES,
        nested,
        *(p.read_text(encoding="utf-8") for p in sorted(FIXTURES.rglob("*.py"))[:40]),
    ]:
        sf = SourceFile.parse("t.py", text)
        owners = _owners_by_ancestry(sf.tree)
        for node in ast.walk(sf.tree):
            if isinstance(node, ast.If):
                assert _enclosing_class(sf, node.test) is owners[id(node.test)][0]
    sf = SourceFile.parse("t.py", nested)
    tests = sorted((n.test for n in ast.walk(sf.tree) if isinstance(n, ast.If)), key=lambda t: t.lineno)
    assert [_enclosing_class(sf, t).name for t in tests] == ["B", "A"]


def test_nodes_grouped_by_type_keep_the_walk_order_within_each_type():
    from fuselint.source import nodes

    for tree in _trees():
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        with nodes.remembered_walks():
            for node in [tree, *functions]:
                everything = list(ast.walk(node))
                kinds = (ast.Assign, ast.AugAssign, ast.Call)
                assert nodes.of_types(node, *kinds) == [
                    n for kind in kinds for n in everything if type(n) is kind
                ]
                assert nodes.stored_names(node) == {
                    n.id for n in everything if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                }
                assert sum(map(len, nodes.grouped(node).values())) == len(everything)
    assert nodes.stored_names(ast.parse("a, (b, c) = d\nfor e in f: g = h")) == {"a", "b", "c", "e", "g"}


@pytest.mark.skipif(not hasattr(ast, "TypeAlias"), reason="`type X = ...` is Python 3.12's")
def test_a_type_alias_name_is_a_child():
    # Python 3.12's TypeAlias keeps its target in `name`, a field that holds a plain string in every
    # other node kind: it reads all its fields.
    tree = ast.parse("type Pair[T] = tuple[T, T]\n")
    for node in ast.walk(tree):
        assert list(child_nodes(node)) == list(ast.iter_child_nodes(node))
    assert [n.id for n in walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)] == ["Pair"]
