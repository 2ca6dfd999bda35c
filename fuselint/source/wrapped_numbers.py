"""A Python number put into a tensor and handed to a helper that reads it back as a slice bound.

transformers' vits builds `num_channels_tensor = torch.IntTensor([self.hidden_size])` in forward
and passes `num_channels_tensor[0]` to `fused_add_tanh_sigmoid_multiply`, which slices with it
(`in_act[:, :num_channels, :]`): a 0-d tensor as a slice bound is an implicit `.item()`, and
dynamo ends the graph there (gb0124). The number was known before it went into the tensor:
passing `self.hidden_size` itself gives the helper the same bound and dynamo a constant.
Measured with torch 2.13 (`tests/source/test_break_fixes.py`, `fixtures/breaks/wrapped_number.py`).

The fix is offered only where the helper is a plain function: transformers 5.17 scripts the same
helper (`@torch.jit.script`), whose unannotated parameters are typed `Tensor`, so passing the number
makes every eager call raise ("Unable to cast 16 to Tensor"; under dynamo, which traces the Python
source, it runs). A decorator may do that or anything else with its arguments' types; the finding
stays, without a fix.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import FunctionFlow, describe
from fuselint.source.module import SourceFile
from fuselint.source.nodes import walk

# Constructors of an integer tensor from a list of Python numbers.
_WRAPPERS = frozenset({"torch.IntTensor", "torch.LongTensor", "torch.tensor"})


def _slice_bound_parameters(flow: FunctionFlow) -> set[str]:
    """Parameters the function uses, never reassigned, as a slice bound (`x[:, :n]`)."""
    fn = flow.fn.node
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    bounds: set[str] = set()
    for site in flow.of(ast.Subscript):
        parts = site.node.slice.elts if isinstance(site.node.slice, ast.Tuple) else [site.node.slice]
        for part in parts:
            if isinstance(part, ast.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if (
                        isinstance(bound, ast.Name)
                        and bound.id in params
                        and flow.assigned.get(bound.id) == 1
                    ):
                        bounds.add(bound.id)
    return bounds


def _stable_number(expr: ast.expr, flow: FunctionFlow) -> bool:
    """An int literal, or `self.attr` that the function never stores to: the same value at every use."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        stored = any(
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and n.attr == expr.attr
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
            for n in walk(flow.fn.node)
        )
        return not stored and expr.attr not in flow.tensor_attrs and expr.attr not in flow.methods
    return False


def _wrapped_elements(sf: SourceFile, flow: FunctionFlow) -> dict[str, list[ast.expr]]:
    """Names assigned once, to an integer tensor built from a list of stable numbers: their elements."""
    found: dict[str, list[ast.expr]] = {}
    for node in walk(flow.fn.node):
        if not (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            continue
        name, value = node.targets[0].id, node.value
        if flow.assigned.get(name) != 1 or not isinstance(value, ast.Call):
            continue
        if sf.imports.qualname(value.func) not in _WRAPPERS or len(value.args) != 1 or value.keywords:
            continue
        elements = value.args[0]
        if isinstance(elements, (ast.List, ast.Tuple)) and all(
            _stable_number(e, flow) for e in elements.elts
        ):
            found[name] = list(elements.elts)
    return found


def _element(arg: ast.expr, wrapped: dict[str, list[ast.expr]]) -> ast.expr | None:
    """The number behind `t[k]` for a wrapped `t` and an int literal `k`, else None."""
    if not (isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) and arg.value.id in wrapped):
        return None
    index = arg.slice
    if not (isinstance(index, ast.Constant) and type(index.value) is int):
        return None
    elements = wrapped[arg.value.id]
    return elements[index.value] if -len(elements) <= index.value < len(elements) else None


# Decorators that hand the arguments to the function unchanged.
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod"})


def _plain(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """No decorator but those that pass the arguments on as they are (module docstring)."""
    return all(isinstance(d, ast.Name) and d.id in _PLAIN_DECORATORS for d in fn.decorator_list)


def _callee(call: ast.Call, flow: FunctionFlow, by_name: dict[tuple[str | None, str], FunctionFlow]):
    """The same-file function a call reaches and how many leading parameters it binds itself."""
    func = call.func
    if isinstance(func, ast.Name):
        return by_name.get((None, func.id)), 0
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        cls = flow.fn.cls.name if flow.fn.cls is not None else None
        callee = by_name.get((cls, func.attr))
        if callee is None:
            return None, 0
        static = any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in callee.fn.node.decorator_list
        )
        return callee, 0 if static else 1
    return None, 0


def wrapped_numbers(sf: SourceFile, all_flows: list[FunctionFlow], rule: Rule) -> Iterable[Finding]:
    """FL101 findings for `t[k]` handed to a same-file helper that slices with it, `t` wrapping Python numbers."""
    by_name = {(f.fn.cls.name if f.fn.cls is not None else None, f.fn.node.name): f for f in all_flows}
    bounds: dict[int, set[str]] = {}
    for flow in all_flows:
        wrapped = _wrapped_elements(sf, flow)
        if not wrapped:
            continue
        for site in flow.of(ast.Call):
            callee, skip = _callee(site.node, flow, by_name)
            if callee is None:
                continue
            if id(callee) not in bounds:
                bounds[id(callee)] = _slice_bound_parameters(callee)
            fn = callee.fn.node
            params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)][skip:]
            passed = list(zip(params, site.node.args, strict=False))
            passed += [(k.arg, k.value) for k in site.node.keywords if k.arg is not None]
            for param, arg in passed:
                number = _element(arg, wrapped)
                if number is None or param not in bounds[id(callee)]:
                    continue
                text = sf.segment(number)
                message = (
                    f"`{describe(arg, 30)}` is the Python number `{describe(number, 30)}` put into a tensor; "
                    f"`{fn.name}` slices with it, an implicit `.item()` that breaks the graph; pass the number"
                )
                fix = None
                if _plain(fn):
                    fix = Fix(
                        Applicability.UNSAFE,
                        f"pass `{text}` itself (assumes it is a Python int, which the tensor held unchanged)",
                        (sf.replace(arg, text),),
                    )
                yield finding(sf, rule, arg, message, fix, path=site.path)
