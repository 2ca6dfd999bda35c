"""Host reads written for `torch.export`: a side road for `torch.compile`.

Code meant to be exported reads a tensor into a Python number on purpose, and bounds the number at
once so that `torch.export` can keep it as an unbacked size::

    n_tiles_h = n_tiles_h.item()
    torch._check_is_size(n_tiles_h)
    torch._check(n_tiles_h <= self.max_num_tiles)

or hands the read straight to `torch.cond` as its predicate (`torch.cond(x.isnan().all().item(),
...)`), which export keeps as a symbolic boolean. Under `torch.compile` with its default settings
such a read still breaks the graph (gb0124), so the finding stays, on its own road (`paths.EXPORT`),
which `--paths normal` leaves out: the people who run this code export it. Seen in torchtune 0.6.1's
`modules/_export` copies and its export-ready image transform (bench/results/precision_untuned30.md).

A read counts when the name it is stored in is an argument of `torch._check`, `torch._check_is_size`
or `torch._check_with` in the same function, or of a call to a method of the same class whose body
makes such a check (`self.check_variable_bounds_for_export(target_size=[h, w], ...)`). A
`torch._check_tensor_all` is a tensor check, not a bound on a number, and does not count.
"""

from __future__ import annotations

import ast

from fuselint.source.imports import ImportTable
from fuselint.source.nodes import walk

_BOUNDS = frozenset({"torch._check", "torch._check_is_size", "torch._check_with"})
_READS = frozenset({"item", "tolist"})


def _is_bound(call: ast.Call, imports: ImportTable) -> bool:
    return imports.qualname(call.func) in _BOUNDS


def _bounding_methods(cls: ast.ClassDef | None, imports: ImportTable) -> frozenset[str]:
    """The methods of `cls` whose bodies call a bound (`torch._check(...)`)."""
    if cls is None:
        return frozenset()
    return frozenset(
        stmt.name
        for stmt in cls.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(isinstance(n, ast.Call) and _is_bound(n, imports) for n in walk(stmt))
    )


def _bounded_names(fn: ast.AST, cls: ast.ClassDef | None, imports: ImportTable) -> set[str]:
    """Names that `fn` hands to a bound, directly or through a bounding method of its class."""
    methods = _bounding_methods(cls, imports)
    names: set[str] = set()
    for node in walk(fn):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        through_method = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and func.attr in methods
        )
        if through_method or _is_bound(node, imports):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                names.update(n.id for n in walk(arg) if isinstance(n, ast.Name))
    return names


def _stored_names(target: ast.expr) -> set[str]:
    return {n.id for n in walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _read_calls(expr: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in walk(expr)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in _READS
        and not n.args
    ]


def export_reads(fn: ast.AST, cls: ast.ClassDef | None, imports: ImportTable) -> frozenset[int]:
    """The ids of the `.item()` / `.tolist()` calls in `fn` that are written for `torch.export`
    (module docstring)."""
    bounded = _bounded_names(fn, cls, imports)
    reads: set[int] = set()
    for node in walk(fn):
        if isinstance(node, ast.Assign) and bounded:
            if any(_stored_names(t) & bounded for t in node.targets):
                reads.update(id(c) for c in _read_calls(node.value))
        elif isinstance(node, ast.Call) and imports.qualname(node.func) == "torch.cond" and node.args:
            reads.update(id(c) for c in _read_calls(node.args[0]))
    return frozenset(reads)
