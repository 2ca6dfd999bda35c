"""Calls dynamo cannot resume after: the caller's line of a callee's graph break is a site too.

When a callee breaks the graph, dynamo (torch 2.13) compiles the caller up to the call, runs the
call in eager and resumes the caller after it; for that it rebuilds the values the call needs.
It cannot rebuild the bound method of an object the compiled code itself built ("Reconstruction
failure", gb0092), so the call's own line is logged as a break beside the callee's. Measured on
toys (`bench/reach20_toys.py`): `k = K(2.0); k.smooth(x)`, `K(2.0).smooth(x)`, a module built in
the frame (`k = M(); k.helper(x)`), a static method called on such an object, and the same call in
a helper that the entry calls all give gb0092 at the call; `smooth(k, x)`, `K.smooth(k, x)`,
`k(x)`, a property read, a breaking constructor, `self.k.smooth(x)`, `super().forward(x)`, and a
`with` or `try` around the call do not.

Per file, `fresh_calls` lists the method calls on objects the calling function builds itself
(every assignment of the receiver is `C(...)`, or the receiver is the call `C(...)`), and
`broken_paths` the paths from the entry (`ModelFunction.chain`) of the functions holding a break
finding. `unresumable` joins them over the tree once reach has settled: a call whose method,
resolved through the `Index`, starts a path that ends at a break is reported on the caller's line
(FL108), naming that break.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import NamedTuple

from fuselint.findings import Finding, Span
from fuselint.source.dataflow import FunctionFlow
from fuselint.source.module import SourceFile
from fuselint.source.nodes import made_once, walk
from fuselint.source.paths import PATH_KEY, off_path, path_note
from fuselint.source.reach import FileSummary, Index, entry_path
from fuselint.source.scope import ModelFunction, innermost_function, own_nodes
from fuselint.source.sites import SITE_PRIORITY, in_site

CODE = "FL108"


class FreshCall(NamedTuple):
    """`recv.attr(...)` where `recv` is an instance of class `cls` that the caller builds."""

    span: Span
    source_line: str
    receiver: str  # as written: `kernel`, or `K(...)` for the call that builds it
    cls: str  # qualified name of the class built (one call per class when branches build others)
    attr: str
    via: tuple[str, ...]  # the path from the entry to the caller, caller included (as `reach.Call`)
    side: str = ""  # the side road the call itself sits on (an `except` block...), "" on the normal path


class BrokenPath(NamedTuple):
    """A function holding a break finding, with the path that reaches it from its entry."""

    chain: tuple[str, ...]
    path: str
    line: int
    code: str
    side: str = ""  # the side road the break sits on (`fuselint.source.paths`), "" on the normal path


def _maker(call: ast.Call, fn: ModelFunction, summary: FileSummary) -> str | None:
    """What a call that may build an object names, for `unresumable` to resolve through the `Index`:
    a class (`C(...)`), a function or class method whose returns may build one (`make(...)`,
    `C.create(...)`), a method of the caller's own class (`self.m(...)` as `module.Class.m`), of
    what it stores (`self.k.m(...)` as `module.Class.k.m`) or of a class built in the call
    (`C(...).m(...)` as `C.m`)."""
    func = call.func
    first = (*fn.node.args.posonlyargs, *fn.node.args.args)[:1]
    if fn.cls is not None and first and first[0].arg == "self" and isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "self":
            return f"{summary.module}.{fn.cls.name}.{func.attr}"
        inner = func.value
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "self"
        ):
            return f"{summary.module}.{fn.cls.name}.{inner.attr}.{func.attr}"  # `self.k.m(...)`
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        owner = summary.qualify(func.value.func)
        return f"{owner}.{func.attr}" if owner is not None else None
    return summary.qualify(func)


# Nodes that bind their `target` (a `with` item its `optional_vars`), and those that bind or
# declare the names under them.
_TARGETED = frozenset({ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr})
_DECLARING = frozenset({ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Delete})


def _built_names(fn: ModelFunction, nodes: list[ast.AST], summary: FileSummary) -> dict[str, list[str]]:
    """Locals of `fn` that every assignment builds (`k = C(...)`, in each branch its own class):
    name -> the qualified names of what the assignments call."""
    args = fn.node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    built: dict[str, set[str | None]] = {}
    for node in nodes:
        kind = type(node)  # a parsed tree's nodes are of the `ast` classes themselves
        if kind is ast.Assign:
            for target in node.targets:
                for name in (target,) if isinstance(target, ast.Name) else walk(target):
                    if isinstance(name, ast.Name):
                        alone = target is name and isinstance(node.value, ast.Call)
                        built.setdefault(name.id, set()).add(
                            _maker(node.value, fn, summary) if alone else None
                        )
        elif kind in _TARGETED:
            target = node.optional_vars if isinstance(node, ast.withitem) else node.target
            for name in walk(target) if target is not None else ():
                if isinstance(name, ast.Name):
                    value = node.value if isinstance(node, ast.AnnAssign) else None
                    qual = _maker(value, fn, summary) if isinstance(value, ast.Call) else None
                    built.setdefault(name.id, set()).add(qual)
        elif kind in _DECLARING:
            for name in walk(node):
                if isinstance(name, ast.alias):
                    built.setdefault((name.asname or name.name).split(".")[0], set()).add(None)
                elif isinstance(name, ast.Name):
                    built.setdefault(name.id, set()).add(None)
    return {name: sorted(quals) for name, quals in built.items() if name not in params and None not in quals}


def _method_calls(fn: ast.AST) -> list[ast.Call]:
    """The calls `x.m(...)` among the function's own nodes, in their order."""
    return [n for n in own_nodes(fn) if type(n) is ast.Call and type(n.func) is ast.Attribute]


def fresh_calls(sf: SourceFile, flows: Iterable[FunctionFlow], summary: FileSummary) -> tuple[FreshCall, ...]:
    """The method calls of the file's in-scope functions (their data flows) on objects the function
    builds, each with the side road the data flow found it on."""
    found: set[FreshCall] = set()
    for flow in flows:
        fn = flow.fn
        side_of = {id(site.node): site.path for site in flow.of(ast.Call)}
        # Both depend on the function's own nodes and class alone: a file linted again for new
        # roots (its analysis kept) lists them once.
        built = made_once(
            "built names",
            (fn.node, fn.cls),
            lambda _key, fn=fn: _built_names(fn, own_nodes(fn.node), summary),
        )
        for node in made_once("method calls", fn.node, _method_calls):
            recv = node.func.value
            if isinstance(recv, ast.Name) and recv.id in built:
                classes = built[recv.id]
            elif isinstance(recv, ast.Call) and (qual := _maker(recv, fn, summary)) is not None:
                classes = [qual]
            else:
                continue
            line = sf.line_text(node.lineno).strip()
            via = entry_path(sf.path, fn)
            side = side_of.get(id(node)) or ""
            shown = ast.unparse(recv) if isinstance(recv, ast.Name) else f"{ast.unparse(recv.func)}(...)"
            for cls in classes:
                found.add(FreshCall(sf.span(node), line, shown, cls, node.func.attr, via, side))
    return tuple(sorted(found))


def broken_paths(
    path: str, findings: Iterable[Finding], functions: list[ModelFunction]
) -> tuple[BrokenPath, ...]:
    """For each break finding, the path from the entry of the innermost in-scope function around it."""
    found: set[BrokenPath] = set()
    for f in findings:
        if not in_site(f) or f.span.path != path:
            continue
        inner = innermost_function(functions, f.span.line)
        if inner is not None:
            found.add(BrokenPath(entry_path(path, inner), path, f.span.line, f.code, off_path(f) or ""))
    return tuple(sorted(found))


def unresumable(
    fresh: Iterable[FreshCall],
    broken: Iterable[BrokenPath],
    index: Index,
) -> list[Finding]:
    """FL108 at each fresh call whose resolved method starts a path to a break finding."""
    # A path from an entry is a chain of calls: each function on it after the entry reaches the
    # break at its end. Functions are named as the paths name them ("Class.method"); the last one's
    # file is known, so a method of that name in another file does not take its break.
    through: dict[str, list[BrokenPath]] = {}
    for b in broken:
        for name in b.chain[1:]:
            through.setdefault(name, []).append(b)
    out: list[Finding] = []
    for call in sorted(fresh):
        owners, returned = _receiver_classes(index, call.cls)
        method, hits = None, []
        for owner in owners:  # the first class (by qualified name) whose method reaches a break
            method = index.method(owner[0], owner[1], call.attr)
            if method is None:
                continue
            defined = index.summaries[method[0]].classes[method[1].split(".")[0]]
            if call.attr in defined.properties:
                continue
            hits = [b for b in through.get(method[1], ()) if b.chain[-1] != method[1] or b.path == method[0]]
            if hits:
                break
        if method is None or not hits:
            continue
        # Name a break on the normal path if there is one, the fewest calls below the method, of
        # the kind dynamo stops at first (`SITE_PRIORITY`: a host read before a warning).
        first = min(
            hits,
            key=lambda b: (
                b.side != "",
                len(b.chain) - b.chain.index(method[1]),
                SITE_PRIORITY.index(b.code),
                b.path != method[0],
                b.path,
                b.line,
            ),
        )
        message = (
            f"`{call.receiver}.{call.attr}(...)` is a graph break of its own: `{method[1]}` breaks the "
            f"graph ({first.code} at {first.path}:{first.line}), and dynamo cannot resume this function "
            f"after the call, since it cannot rebuild the bound method of an object built "
            f"{'by the call that returns it' if returned else 'here'} (gb0092); build it outside the "
            f"compiled code or fix the break in `{method[1]}`"
        )
        details: tuple[tuple[str, str], ...] = ()
        # The call sits on a side road (an `except` block...), or every break it reaches does.
        side = call.side or first.side
        if side:
            message, details = f"{message} ({path_note(side)})", ((PATH_KEY, side),)
        out.append(
            Finding(code=CODE, message=message, span=call.span, source_line=call.source_line, details=details)
        )
    return out


def _receiver_classes(index: Index, maker: str) -> tuple[list[tuple[str, str]], bool]:
    """The classes of the tree an object made by `maker` (`_maker`) is, and whether a call returned
    it: the class it names, or those every return of the function or method it names builds
    (`FileSummary.built`: a method of each class its owner may be, `Index.instance_classes`, which
    reads `module.Class.attr` as the classes stored on `self.attr`); none when a return may give
    anything else, or a class out of the tree."""
    owner = index._class(maker)
    if owner is not None:
        return [owner], False
    found = index.lookup(maker)
    made: set[str] = set()
    if found is not None and found[2] is None:
        path, head = found[0], found[1]
        if head not in index.summaries[path].functions or head not in index.summaries[path].built:
            return [], False
        made.update(index.summaries[path].built[head])
    else:
        prefix, _, attr = maker.rpartition(".")
        for cls in index.instance_classes(prefix) if prefix else ():
            hit = index.method(*cls, attr)
            if hit is None or hit[1] not in index.summaries[hit[0]].built:
                return [], False
            made.update(index.summaries[hit[0]].built[hit[1]])
    classes = [index._class(q) for q in sorted(made)]
    if not classes or None in classes:
        return [], False
    return sorted(set(classes)), True
