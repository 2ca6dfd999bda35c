"""Data-sized values across calls: a parameter a caller fills with rows sized by the data, and a
helper that returns such rows.

FL102's count tests (`count_branches`) start from the ops FL106 flags in the same function. A
check on a parameter's size (kornia's `nms(boxes, scores, ...)`: `if boxes.shape[0] !=
scores.shape[0]: raise`) breaks only where a caller hands over rows the data sized (SOLD2's
`prob_to_junctions` passes a `torch.where` result and a mask read): once FL106's fix keeps those
ops in the graph, the sizes are unbacked and dynamo cannot compare them. Flagging every size check
of two parameters would flag checks that never break, so a parameter is data-sized only *in the
calls that size it*, and the finding names that call's path.

Per file (`file_sized`): the parameters that the file's own calls size, the helpers whose every
return is data-sized (their calls are data-sized values in the callers), and, for calls into other
files, the positions and keywords whose argument is data-sized (`reach.Call.sized`, which
`reach_roots` hands to the callee as `scope.Reached.sized` and `ModelFunction.sized`). Each
fact also says whether it holds with only FL106's *fixed* ops (`_fuselint_` calls) as sources:
a count that only unfixed ops size sits on the `after-fix` road (`paths.AFTER_FIX`).
Everything runs in source order and only grows, so the result is the same in every run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from fuselint.source.count_branches import DataSized
from fuselint.source.dataflow import FIX_OPS, _bound_names
from fuselint.source.module import SourceFile
from fuselint.source.nodes import made_once
from fuselint.source.reach import own_returns
from fuselint.source.scope import call_parameters, own_nodes
from fuselint.source.unbacked_ops import in_host_loop

# Where rows sized by the data come from: (the path to the function that holds the op, its line).
# Two parameters filled from one source have one count (`count_branches.Count`).
Source = tuple[tuple[str, ...], int]
_MAX_ROUNDS = 8  # a chain of helpers in one file passing rows on is rarely longer


@dataclass
class FileSized:
    """What `file_sized` finds in one file."""

    sf: SourceFile
    # id of a function node -> parameter -> (sized by a fixed op, the path of the call, the source)
    params: dict[int, dict[str, tuple[bool, tuple[str, ...], Source]]] = field(default_factory=dict)
    # id of a function node -> its returns hold rows sized by a fixed op (False: by an unfixed one)
    returns: dict[int, bool] = field(default_factory=dict)
    # id of a function node -> position -> that item of every tuple it returns holds data-sized rows
    # (sized by a fixed op: True); for functions whose returns are not all data-sized
    items: dict[int, dict[int, bool]] = field(default_factory=dict)
    # id of a call node -> (position or keyword, sized by a fixed op, source) of its data-sized arguments
    arguments: dict[int, tuple[tuple[int | str, bool, Source], ...]] = field(default_factory=dict)
    # id of a call node -> the same-file function it runs (a `ModelFunction`)
    callees: dict[int, object] = field(default_factory=dict)
    # each source of a parameter's rows -> the negative number `DataSized` counts it by, and back
    numbers: dict[Source, int] = field(default_factory=dict)
    sources: dict[int, Source] = field(default_factory=dict)

    def number(self, source: Source) -> int:
        if source not in self.numbers:
            self.numbers[source] = -1 - len(self.numbers)
            self.sources[self.numbers[source]] = source
        return self.numbers[source]

    def source(self, flow, line: int) -> Source:
        """The source of rows `DataSized` says come from `line` of `flow`'s function."""
        return self.sources[line] if line < 0 else (flow.fn.chain, line)

    def sized(self, flow, roots: set[int], fixed_only: bool = False, strict: bool = False) -> DataSized:
        """The function's `DataSized`, with its helpers' data-sized results and its sized parameters
        (only those a fixed op sizes, with `fixed_only`: then `roots` are left out too); `strict`
        for what crosses a call (`DataSized.strict`)."""
        returned = {
            id(call): fixed
            for call in _calls(flow)
            if (callee := self.callees.get(id(call))) is not None and id(callee.node) in self.returns
            for fixed in (self.returns[id(callee.node)],)
        }
        items = {
            id(call): frozenset(
                p for p, fixed in self.items[id(callee.node)].items() if fixed or not fixed_only
            )
            for call in _calls(flow)
            if (callee := self.callees.get(id(call))) is not None and id(callee.node) in self.items
        }
        items = {call: positions for call, positions in items.items() if positions}
        params = self.params.get(id(flow.fn.node), {})
        numbers = {
            p: self.number(source) for p, (fixed, _, source) in params.items() if fixed or not fixed_only
        }
        if fixed_only:
            return DataSized(
                flow.fn.node, {i for i, fixed in returned.items() if fixed}, self.sf, numbers, strict, items
            )
        return DataSized(flow.fn.node, roots | set(returned), self.sf, numbers, strict, items)


def _calls(flow) -> list[ast.Call]:
    return [site.node for site in flow.of(ast.Call)]


def _label(fn) -> str:
    return f"{fn.cls.name}.{fn.node.name}" if fn.cls is not None else fn.node.name


def file_sized(sf: SourceFile, flows: list) -> FileSized:
    """The file's data-sized parameters, returns and arguments (made once per file analysis)."""
    # Beside the flows (`dataflow.flows`), which a later round of a kept file makes anew.
    made = made_once("flows", None, lambda _: {})
    found = made.get(("sized_calls", id(flows)))
    if found is None:
        found = made["sized_calls", id(flows)] = (flows, _file_sized(sf, flows))
    return found[1]


def _file_sized(sf: SourceFile, flows: list) -> FileSized:
    from fuselint.source.checks.dynamic_shapes import data_sized_roots  # the checks import this module

    out = FileSized(sf)
    for flow in flows:
        if flow.fn.sized:
            out.params[id(flow.fn.node)] = {
                p: (fixed, path, source) for p, fixed, path, source in flow.fn.sized
            }
    roots = {id(flow): _kept_roots(sf, flow, data_sized_roots(sf, flow)) for flow in flows}
    fixed_ops = FIX_OPS in sf.text
    if not out.params and not fixed_ops and not any(roots.values()):
        return out
    by_node = {(f.fn.cls.name if f.fn.cls is not None else None, f.fn.node.name): f.fn for f in flows}
    # ids of the flows worth reading: a source of rows, a call of a function of the file
    calling: set[int] = set()
    for flow in flows:
        callees = _same_file_callees(flow, by_node)
        out.callees.update(callees)
        if callees or fixed_ops:
            calling.add(id(flow))
    for _ in range(_MAX_ROUNDS):
        if not _round(flows, roots, calling, out):
            break
    for flow in flows:
        _arguments(flow, roots[id(flow)], id(flow) in calling, out)
    return out


def _kept_roots(sf: SourceFile, flow, roots: set[int]) -> set[int]:
    """The roots whose rows can reach a callee unbacked: not a call FL106's fix leaves alone because
    a Python loop walks a data-sized result around or from it (`unbacked_ops.in_host_loop`): dynamo
    breaks at that op for good, and what it hands on has a known size (sam3_video's
    `nonzero(prompt_ids_tensor == prompt_id)` in a loop over `unique()`, passed as rows to a helper)."""
    if not roots:
        return roots
    plain = DataSized(flow.fn.node, roots, sf)
    return roots - {
        id(site.node)
        for site in flow.of(ast.Call)
        if id(site.node) in roots and in_host_loop(site, flow, plain.sized)
    }


def _same_file_callees(flow, by_node: dict) -> dict[int, object]:
    """The same-file function each call runs: a free function `f(...)` that the caller does not
    bind itself, or `self.m(...)` of the caller's class (what `scope` follows in the file)."""
    fn = flow.fn
    found = {}
    local = _local_names(fn.node)
    for call in _calls(flow):
        func = call.func
        if isinstance(func, ast.Name):
            # a parameter or a local binding of the name (a callable handed in) shadows the file's function
            callee = by_node.get((None, func.id)) if func.id not in local else None
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and fn.cls is not None
        ):
            callee = by_node.get((fn.cls.name, func.attr))
        else:
            callee = None
        if callee is not None and callee.node is not fn.node:
            found[id(call)] = callee
    return found


def _local_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names `fn` binds itself: its parameters, and what its own body stores, defines or imports."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    return names.union(*(_bound_names(n) for n in own_nodes(fn)))


def _round(flows: list, roots: dict[int, set[int]], calling: set[int], out: FileSized) -> bool:
    """One pass over the file's functions in source order; whether anything was added."""
    changed = False
    for flow in flows:
        if not roots[id(flow)] and id(flow.fn.node) not in out.params and id(flow) not in calling:
            continue
        both = out.sized(flow, roots[id(flow)], strict=True)
        fixed = out.sized(flow, roots[id(flow)], fixed_only=True, strict=True)
        for call in _calls(flow):
            callee = out.callees.get(id(call))
            if callee is None:
                continue
            names = call_parameters(callee.node, callee.cls is not None)
            path = (*flow.fn.chain, _label(callee))
            for where, arg in _arguments_of(call):
                name = names[where] if isinstance(where, int) and where < len(names) else where
                line = both.sized(arg)
                if not isinstance(name, str) or line is None:
                    continue
                by_fixed = fixed.sized(arg) is not None
                known = out.params.setdefault(id(callee.node), {})
                if name not in known or (by_fixed and not known[name][0]):
                    known[name] = (by_fixed, path, out.source(flow, line))
                    changed = True
        values = [r.value for r in own_returns(flow.fn.node) or ()]  # none for a generator
        if values and all(v is not None and both.sized(v) is not None for v in values):
            by_fixed = all(fixed.sized(v) is not None for v in values)
            if out.returns.get(id(flow.fn.node)) not in (True, by_fixed):
                out.returns[id(flow.fn.node)] = by_fixed
                changed = True
        elif _returned_items(values, both, fixed, out.items.setdefault(id(flow.fn.node), {})):
            changed = True
    return changed


def _returned_items(values: list, both: DataSized, fixed: DataSized, known: dict[int, bool]) -> bool:
    """Record the positions at which every returned tuple (each `return` a tuple display of one
    length: `return best, frames, filled, dtype`) holds data-sized rows; whether any was added."""
    if not values or not all(isinstance(v, ast.Tuple) for v in values):
        return False
    if len({len(v.elts) for v in values}) != 1 or any(
        isinstance(e, ast.Starred) for v in values for e in v.elts
    ):
        return False
    changed = False
    for position in range(len(values[0].elts)):
        parts = [v.elts[position] for v in values]
        if all(both.sized(p) is not None for p in parts):
            by_fixed = all(fixed.sized(p) is not None for p in parts)
            if known.get(position) not in (True, by_fixed):
                known[position] = by_fixed
                changed = True
    return changed


def _arguments(flow, roots: set[int], calling: bool, out: FileSized) -> None:
    """The data-sized arguments of the function's calls (for the calls into other files)."""
    if not roots and id(flow.fn.node) not in out.params and not calling:
        return
    both = out.sized(flow, roots, strict=True)
    fixed = out.sized(flow, roots, fixed_only=True, strict=True)
    for call in _calls(flow):
        found = tuple(
            (where, fixed.sized(arg) is not None, out.source(flow, line))
            for where, arg in _arguments_of(call)
            if (line := both.sized(arg)) is not None
        )
        if found:
            out.arguments[id(call)] = found


def _arguments_of(call: ast.Call) -> list[tuple[int | str, ast.expr]]:
    """(position, argument) up to the first starred one, then (keyword, value)."""
    found: list[tuple[int | str, ast.expr]] = []
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        found.append((position, arg))
    found.extend((k.arg, k.value) for k in call.keywords if k.arg is not None)
    return found
