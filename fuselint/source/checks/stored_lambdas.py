"""FL102 on a default lambda stored on the object and called from traced code.

diffusers' SA-Solver sets `self.tau_func = lambda t: 1 if t >= 200 and t <= 800 else 0` in
`__init__` and calls `self.tau_func(self.timestep_list[-1])` in `step`: with a tensor timestep
the conditional expression reads a tensor value, and dynamo breaks the graph at the lambda's line
(gb0170, scheduling_sasolver.py:238). The traced function is `step`, not `__init__`, so the
function-by-function checks never see the lambda: this check follows `self.NAME(...)` calls of
traced methods to a one-argument lambda the class stores under that name.

The fix selects in the graph: `lambda t: torch.where((torch.as_tensor(t) >= 200) &
(torch.as_tensor(t) <= 800), 1, 0)`. Only for a test built of comparisons between the argument
and number literals (`and`, `or`, `not`, chains) and two int literals as the values: the same
value for every argument, as a 0-d int64 tensor where the lambda returned an int (unsafe).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.checks._shared import finding, has_comment, torch_name
from fuselint.source.dataflow import DIM, HOST, SHAPE, flows
from fuselint.source.module import SourceFile
from fuselint.source.nodes import walk
from fuselint.source.scope import ModelFunction

LAMBDA_MESSAGE = (
    "select with `torch.where` inside the lambda (assumes its callers take a 0-d int64 tensor "
    "where it returned an int: the same value, and tensor arithmetic with it gives the same results; "
    "a Python-number argument is read through `torch.as_tensor`)"
)


def _int_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _elementwise(test: ast.expr, arg: str, torch: str) -> ast.expr | None:
    """`test` with `and`/`or`/`not` as `&`/`|`/`~`, each comparison split in pairs and the argument
    read as `torch.as_tensor(arg)`; None unless every operand is the argument or a number."""
    if isinstance(test, ast.BoolOp):
        parts = [_elementwise(v, arg, torch) for v in test.values]
        if any(p is None for p in parts):
            return None
        op = ast.BitAnd() if isinstance(test.op, ast.And) else ast.BitOr()
        out = parts[0]
        for part in parts[1:]:
            out = ast.BinOp(out, op, part)
        return out
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _elementwise(test.operand, arg, torch)
        return None if inner is None else ast.UnaryOp(ast.Invert(), inner)
    if not isinstance(test, ast.Compare):
        return None
    operands = [test.left, *test.comparators]
    if not all(_number(o) or (isinstance(o, ast.Name) and o.id == arg) for o in operands):
        return None
    if not any(isinstance(o, ast.Name) for o in operands):
        return None
    if not all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)) for op in test.ops):
        return None

    def read(o: ast.expr) -> ast.expr:
        if isinstance(o, ast.Name):
            return ast.Call(ast.parse(f"{torch}.as_tensor", mode="eval").body, [ast.Name(arg)], [])
        return o

    pairs = [ast.Compare(read(operands[i]), [op], [read(operands[i + 1])]) for i, op in enumerate(test.ops)]
    out = pairs[0]
    for pair in pairs[1:]:
        out = ast.BinOp(out, ast.BitAnd(), pair)
    return out


def _stored_lambdas(cls: ast.ClassDef) -> dict[str, list[ast.Lambda]]:
    """`self.NAME = lambda x: ...` anywhere in the class's methods -> the lambdas."""
    found: dict[str, list[ast.Lambda]] = {}
    for node in walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and len(node.targets) == 1:
            target = node.targets[0]
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                found.setdefault(target.attr, []).append(node.value)
    return found


def lambda_fix(sf: SourceFile, lam: ast.Lambda) -> Fix | None:
    args = lam.args
    if (
        len(args.args) != 1
        or args.posonlyargs
        or args.kwonlyargs
        or args.vararg
        or args.kwarg
        or args.defaults
    ):
        return None
    body = lam.body
    if not (isinstance(body, ast.IfExp) and _int_literal(body.body) and _int_literal(body.orelse)):
        return None
    if has_comment(sf, lam):
        return None
    torch, imports = torch_name(sf)
    test = _elementwise(body.test, args.args[0].arg, torch)
    if test is None:
        return None
    where = f"{torch}.where({ast.unparse(test)}, {sf.segment(body.body)}, {sf.segment(body.orelse)})"
    return Fix(Applicability.UNSAFE, LAMBDA_MESSAGE, (sf.replace(body, where),), imports)


def stored_lambda_tests(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    """FL102 at the test of a stored lambda's conditional expression that a traced method calls
    with a value that may be a tensor (not shown to be a Python number)."""
    lambdas: dict[int, dict[str, list[ast.Lambda]]] = {}
    done: set[int] = set()
    for flow in flows(functions, sf.imports):
        cls = flow.fn.cls
        if cls is None:
            continue
        if id(cls) not in lambdas:
            lambdas[id(cls)] = _stored_lambdas(cls)
        stored = lambdas[id(cls)]
        if not stored:
            continue
        for site in flow.of(ast.Call):
            call = site.node
            func = call.func
            if not (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                continue
            if func.attr not in stored or len(call.args) != 1 or call.keywords:
                continue
            if flow.kind(call.args[0], site.env) in HOST | {DIM, SHAPE} or flow.host_number(
                call.args[0], site.env
            ):
                continue
            for lam in stored[func.attr]:
                if id(lam) in done or not isinstance(lam.body, ast.IfExp):
                    continue
                done.add(id(lam))
                message = (
                    f"`self.{func.attr}` (a lambda stored at line {lam.lineno}) is called in `{flow.fn.node.name}` "
                    f"(line {call.lineno}) with `{sf.segment(call.args[0])}`: for a tensor, its conditional "
                    f"expression reads the value: {rule.message}"
                )
                yield finding(sf, rule, lam.body.test, message, lambda_fix(sf, lam), path=site.path)
