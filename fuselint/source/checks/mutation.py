"""FL104 and FL105: forward code that copies or re-flags Python objects instead of computing.

`copy.deepcopy` in forward (encoder-decoder models copy `past_key_values` or a config)
walks arbitrary Python objects, and dynamo breaks the graph when it meets a tensor inside
(gb4198, or gb0088 from a tensor in a NamedTuple; torch 2.13). It copies host values without a
break (strings, numbers, dataclasses and configs made of them), so a copy of a parameter whose
annotation names host types only (`texts: List[Optional[str]]`, audiocraft's tokenizer) is not
reported.
Setting `.requires_grad` or calling `.requires_grad_()` on a tensor in forward mutates
autograd metadata that dynamo does not model inside a graph (gb0206 on torch 2.13);
it typically sits in train-only paths, so it breaks only when training. Turning the flag off
on a tensor just detached (`.detach().requires_grad_(False)`) traces without a break and is not
reported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.checks import check
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import FunctionFlow, describe, flows
from fuselint.source.module import SourceFile
from fuselint.source.nodes import stored_names, walk
from fuselint.source.scope import ModelFunction

# What an annotation may name and still describe host values only: Python's scalars and strings,
# and the containers of builtins and `typing` (under `typing.`, `tp.` or `t.`) with their elements
# named (a bare `list` may hold tensors).
_HOST_SCALARS = frozenset({"str", "int", "float", "bool", "bytes", "complex"})
_CONTAINERS = frozenset(
    {"list", "List", "dict", "Dict", "tuple", "Tuple", "set", "Set", "frozenset", "FrozenSet", "Optional",
     "Union", "Sequence", "Mapping", "Iterable", "Collection", "Literal"}
)  # fmt: skip
_TYPING_MODULES = frozenset({"typing", "tp", "t"})


def _type_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in _TYPING_MODULES
    ):
        return node.attr
    return None


def _names_host_types_only(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    subscripted = {id(n.value) for n in walk(annotation) if isinstance(n, ast.Subscript)}
    seen = False
    for node in walk(annotation):
        if isinstance(node, ast.Name) and node.id in _TYPING_MODULES:
            continue  # the `tp` of `tp.List`, checked with its attribute
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _type_name(node)
            if name in _HOST_SCALARS or (name in _CONTAINERS and id(node) in subscripted):
                seen = True
                continue
            return False
    return seen


def _copies_host_values(call: ast.Call, flow: FunctionFlow) -> bool:
    """`deepcopy(p)` of a parameter annotated with host types only and not rebound before the call:
    the copy holds no tensor, and dynamo copies it without a break."""
    arg = call.args[0] if call.args else None
    if not isinstance(arg, ast.Name):
        return False
    signature = flow.fn.node.args
    parameter = next(
        (a for a in (*signature.posonlyargs, *signature.args, *signature.kwonlyargs) if a.arg == arg.id), None
    )
    if parameter is None or parameter.annotation is None or not _names_host_types_only(parameter.annotation):
        return False
    return not any(
        isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For))
        and node.lineno < call.lineno
        and arg.id in stored_names(node.target if isinstance(node, ast.For) else node)
        for node in walk(flow.fn.node)
    )


@check("FL104")
def deepcopy_in_forward(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        fn = flow.fn
        for site in flow.of(ast.Call):
            if sf.imports.qualname(site.node.func) == "copy.deepcopy" and not _copies_host_values(
                site.node, flow
            ):
                subject = describe(site.node.args[0], 40) if site.node.args else "an object"
                message = f"`copy.deepcopy({subject})` in `{fn.node.name}`: {rule.message}"
                yield finding(sf, rule, site.node, message, path=site.path)


def _requires_grad_targets(stmt: ast.stmt) -> list[ast.Attribute]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return []
    return [t for t in targets if isinstance(t, ast.Attribute) and t.attr == "requires_grad"]


# Factories whose result requires no grad unless asked (`requires_grad=True`).
_FACTORIES = frozenset(
    {"tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "rand", "randn",
     "randint", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like"}
)  # fmt: skip


def _turns_off(call: ast.Call, flow: FunctionFlow) -> bool:
    """`t.requires_grad_(False)` on a tensor that requires no grad: one just detached, or one a
    factory made (`torch.tensor(1).fill_(v).to(d)`, directly or through a name assigned once).
    Dynamo traces that without a break (torch 2.13). On a tensor that requires grad (a
    parameter, an input) `requires_grad_(False)` breaks like `requires_grad_()` does."""
    flag = (
        call.args[0]
        if call.args
        else next((k.value for k in call.keywords if k.arg == "requires_grad"), None)
    )
    if isinstance(flag, ast.Name) and flow.constants.get(flag.id, True) is False:
        flag = ast.Constant(False)  # `requires_grad_(requires_grad)` with the parameter left False
    if not (isinstance(flag, ast.Constant) and flag.value is False):
        return False
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Name) and flow.assigned.get(receiver.id) == 1:
        receiver = next(
            (
                site.node.value
                for site in flow.of(ast.Assign)
                if len(site.node.targets) == 1
                and isinstance(site.node.targets[0], ast.Name)
                and site.node.targets[0].id == receiver.id
            ),
            receiver,
        )
    return _fresh(receiver, flow)


def _fresh(expr: ast.expr | None, flow: FunctionFlow) -> bool:
    """A tensor that requires no grad: `.detach()` of anything, or a factory call's result through
    methods that keep that (`.fill_()`, `.to()`, `.type()`)."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "detach":
            return True
        qual = flow.imports.qualname(expr.func)
        if qual is not None and qual.startswith("torch.") and qual.removeprefix("torch.") in _FACTORIES:
            return not any(k.arg == "requires_grad" for k in expr.keywords)
        expr = expr.func.value
    return False


@check("FL105")
def requires_grad_in_forward(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        fn = flow.fn
        for site in flow.of(ast.Assign, ast.AnnAssign, ast.AugAssign):
            for target in _requires_grad_targets(site.node):
                message = f"setting `{describe(target, 40)}` in `{fn.node.name}`: {rule.message}"
                yield finding(sf, rule, target, message, path=site.path)
        for site in flow.of(ast.Call):
            func = site.node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "requires_grad_"
                and not _turns_off(site.node, flow)
            ):
                message = f"`{describe(func, 40)}()` in `{fn.node.name}`: {rule.message}"
                yield finding(sf, rule, site.node, message, path=site.path)
