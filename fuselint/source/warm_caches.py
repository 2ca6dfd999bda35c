"""Methods whose body runs only while a cache on `self` is empty, which the constructor fills.

Self-supervised wrappers build a teacher or target network lazily through a memo decorator
(`@singleton("teacher_encoder")`: the wrapper returns `getattr(self, key)` when it is set, else
runs the method and `setattr`s the result), and their `__init__` sends a mock input through
`self.forward(...)` so that the memo is filled before anyone compiles the model. A compiled call
then finds the cache set and never runs the method's body (`copy.deepcopy`, `p.requires_grad =
...`); the body runs again only after user code empties the cache (a `reset_moving_average()`).
Findings there sit on that road (`paths.WARMED`), not on the normal one. Checked with dynamo on
the pattern itself (tests/source/test_prec28_classes.py): the warmed model compiles in one graph,
and the same model after a reset breaks in the method's body.
"""

from __future__ import annotations

import ast

from fuselint.source.nodes import self_attribute, walk

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _memo_key_position(factory: FunctionNode, wrappers: list[FunctionNode]) -> int | None:
    """The position of `factory`'s parameter that names the cache attribute, when one of its
    wrappers reads `getattr(self, key)`, returns that value when it is set, and `setattr`s
    `self`'s `key` otherwise; None for any other decorator."""
    params = [a.arg for a in (*factory.args.posonlyargs, *factory.args.args)]
    for wrapper in wrappers:
        positional = [*wrapper.args.posonlyargs, *wrapper.args.args]
        if not positional:
            continue
        owner = positional[0].arg
        read: dict[str, str] = {}  # local name -> key parameter of the getattr it holds
        written: set[str] = set()
        returned: set[str] = set()
        for node in walk(wrapper):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                key = _accessed_key(node.value, "getattr", owner, params)
                if key is not None:
                    read[node.targets[0].id] = key
            elif isinstance(node, ast.Call):
                key = _accessed_key(node, "setattr", owner, params)
                if key is not None:
                    written.add(key)
            elif isinstance(node, ast.If) and _returns_when_set(node):
                returned.add(node.body[0].value.id)
        keys = {read[name] for name in returned if name in read} & written
        if len(keys) == 1:
            return params.index(keys.pop())
    return None


def _accessed_key(expr: ast.expr, builtin: str, owner: str, params: list[str]) -> str | None:
    """`getattr(self, key)` / `setattr(self, key, v)` with `key` a parameter of the factory."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == builtin):
        return None
    if len(expr.args) < 2 or not (isinstance(expr.args[0], ast.Name) and expr.args[0].id == owner):
        return None
    key = expr.args[1]
    return key.id if isinstance(key, ast.Name) and key.id in params else None


def _returns_when_set(node: ast.If) -> bool:
    """`if v is not None: return v` (or `if v:` / `if exists(v):`), nothing else in the branch."""
    if len(node.body) != 1 or not isinstance(node.body[0], ast.Return):
        return False
    value = node.body[0].value
    if not isinstance(value, ast.Name):
        return False
    test = node.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
        test = test.left
    elif isinstance(test, ast.Call) and len(test.args) == 1 and not test.keywords:
        test = test.args[0]  # `exists(v)`: a helper that tests for None
    return isinstance(test, ast.Name) and test.id == value.id


def _memo_key(method: FunctionNode, free: dict[str, FunctionNode], wrappers_of) -> str | None:
    """The attribute a memo decorator of `method` caches its result in: `"teacher_encoder"` for
    `@singleton("teacher_encoder")` where `singleton` is a memo decorator of this file."""
    for decorator in method.decorator_list:
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)):
            continue
        factory = free.get(decorator.func.id)
        if factory is None:
            continue
        position = _memo_key_position(factory, wrappers_of(factory, free))
        if position is None or position >= len(decorator.args):
            continue
        key = decorator.args[position]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _top_calls(fn: FunctionNode) -> list[ast.Call]:
    """The calls that `fn` makes as statements of its own body or of `with` blocks in it: calls that
    run on every call of `fn` that gets that far (not those under an `if`, a loop or a `try`)."""
    found: list[ast.Call] = []
    stack = list(fn.body)
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            stack[:0] = stmt.body
            continue
        if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            found.extend(n for n in walk(stmt.value) if isinstance(n, ast.Call))
    return found


def _self_method(call: ast.Call) -> str | None:
    """`m` for `self.m(...)`, `forward` for `self(...)`."""
    if isinstance(call.func, ast.Name) and call.func.id == "self":
        return "forward"
    return self_attribute(call.func)


def warmed_methods(cls: ast.ClassDef, free: dict[str, FunctionNode], wrappers_of) -> dict[str, str]:
    """The methods of `cls` that its `__init__` runs eagerly while their memo cache is empty, so
    that a later (compiled) call finds the cache set: {method name: cache attribute}.

    A memo method counts when `__init__` first sets the cache attribute to None and then, as a
    statement of its own (not under an `if`, a loop or a `try`), calls the method or `forward`
    (`self.forward(mock)`, `self(mock)`) where `forward` calls the method the same way."""
    methods = {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init = methods.get("__init__")
    if init is None:
        return {}
    keys = {
        name: key for name, fn in methods.items() if (key := _memo_key(fn, free, wrappers_of)) is not None
    }
    if not keys:
        return {}
    forward = methods.get("forward")
    forward_calls = {_self_method(c) for c in _top_calls(forward)} if forward is not None else set()
    emptied: set[str] = set()
    warmed: dict[str, str] = {}
    for stmt in init.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is None:
            emptied.update(a for t in stmt.targets if (a := self_attribute(t)) is not None)
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        called = _self_method(stmt.value)
        runs = {called} | (forward_calls if called == "forward" else set())
        for name, key in keys.items():
            if name in runs and key in emptied:
                warmed[name] = key
    return warmed
