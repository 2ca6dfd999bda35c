"""Which functions run under torch.compile: the only places source rules look.

A function is in scope when it is `forward` of an nn.Module subclass, one of the methods that
torch.distributions calls on a `Distribution` or `Transform` subclass (`log_prob`, `rsample`,
`_inverse`, ...: `DISTRIBUTION_ENTRIES`), one of the methods a framework base class of another
package runs from its own `forward` (torchmetrics' `Metric` runs `update` and `compute`:
`FRAMEWORK_ENTRIES`), is decorated
with or passed to `torch.compile` (`torch.compile(fn)`, `torch.compile(obj.method)`), is
named by the project's `traced-functions` (a scheduler's `step` for users who compile their
whole sampling loop), or is called from an in-scope function of the same file
(`self.helper(...)` in the same class, or a module-level function), or is the wrapper that a
decorator of an in-scope function returns (`@capture_outputs` runs `wrapper` instead). Functions that an entry of
another file reaches (`fuselint.source.reach`) come in as `Reached` roots: they are in scope
with the path from that entry, and so is what they call in this file.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from fuselint.source.aliases import ALIAS_ROOT, file_aliases, type_aliases
from fuselint.source.dispatchers import swapped_methods
from fuselint.source.guards import common_facts, site_facts
from fuselint.source.imports import ImportTable, iter_statements
from fuselint.source.nodes import child_nodes, made_once, walk
from fuselint.source.paths import COMPILED_WHOLE, WARMED, option_road
from fuselint.source.tracing_truth import live_nodes
from fuselint.source.warm_caches import warmed_methods

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
# A root named "^C": class C of this file is an nn.Module through a base of another file.
MODULE_ROOT = "^"
# What calling a module runs: `forward`, or the class's own `__call__` where it overrides
# nn.Module's (gpytorch's `Kernel.__call__`, transformers' `GradientCheckpointingLayer.__call__`):
# `torch.compile(model)` traces whichever `model(x)` runs.
MODULE_ENTRIES = frozenset({"forward", "__call__"})
# What a reaching call's argument list records for a starred argument or a `**mapping`.
STARRED = "*"

# Base classes that make a class a module even when we cannot resolve them to torch:
# model zoos subclass their own PreTrainedModel, Module mixins, Lightning modules ...
_MODULE_BASE_SUFFIXES = ("Module", "Model", "Layer", "Block", "PreTrainedModel", "Network", "Net")


# A call such as `torch.compile(fn)` or `torch.jit.script(fn)` in the text ("is_compiling" is no call).
# The words are found with `str.find` (a regex tries its alternatives at every position: ~5x
# slower on a modeling file), then what follows each and the character before it are checked.
_CALL_OPEN = re.compile(r"\s*\(")


def _mentions_compile_call(text: str) -> bool:
    """`compile(` or `script(` (spaces allowed before the parenthesis) starts a word of `text`."""
    for word in ("compile", "script"):
        start = text.find(word)
        while start >= 0:
            before = text[start - 1] if start else " "
            if not (before.isalnum() or before == "_") and _CALL_OPEN.match(text, start + len(word)):
                return True
            start = text.find(word, start + 1)
    return False


@dataclass(frozen=True)
class ModelFunction:
    """An in-scope function, with the class it belongs to (None for free functions)."""

    node: FunctionNode
    cls: ast.ClassDef | None
    reason: str  # "forward", "distribution", "framework", "compiled", "configured", "called", "reached"
    # For a function in scope only because an entry of another file reaches it: the path from
    # that entry ("pkg/m.py:Model.forward", "helper"); None when this file's own entries reach it.
    via: tuple[str, ...] | None = None
    # What the callers in other files passed, per parameter: the kinds of the arguments.
    given: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The functions from the entry to this one ("Model.forward", "helper"); the entry of another
    # file carries its path ("pkg/m.py:Model.forward").
    chain: tuple[str, ...] = ()
    # The side road (`fuselint.source.paths`) every call that reaches it from another file sits on.
    side: str | None = None
    # Parameters that every call from another file leaves at their constant default (`flag=False`).
    left: tuple[tuple[str, object], ...] = ()
    # Parameters some caller in another file hands an element it iterates from this object's own
    # attribute: (parameter, attribute, the caller's entry), sorted. Kept for a function this
    # file's entries reach too (a scheduler's `step` compiled alone and called from a pipeline).
    elements: tuple[tuple[str, str, str], ...] = ()
    # What every in-scope call of this method states about `self` (`if self.merged:
    # self.unmerge()`): (attribute, truth) pairs, `fuselint.source.guards`. Empty for entries.
    facts: frozenset[tuple[str, bool]] = frozenset()
    # The type aliases the file's annotations may name, its own and those it imports from other
    # files of the tree: (name, the alias's text), sorted (`fuselint.source.aliases`).
    aliases: tuple[tuple[str, str], ...] = ()
    # Parameters a caller in another file fills with rows sized by the data (`sized_calls`):
    # (parameter, sized by one of FL106's fixed ops, the path of that call, the rows' source), sorted.
    sized: tuple[tuple[str, bool, tuple[str, ...], tuple], ...] = ()


@dataclass(frozen=True)
class Reached:
    """A function of this file that an entry of another file calls: `name` is "f" or "Class.method".

    `args` holds the kinds of the positional arguments after the bound one (None: unknown, "*": a
    starred argument, whose positions are unknown), `keywords` the kinds of the named ones ("*" for
    a `**mapping`);
    several callers' kinds are merged per parameter."""

    name: str  # "@f": the wrappers decorator `f` returns (`wrappers`), put on an entry there
    via: tuple[str, ...]
    args: tuple[tuple[str | None, ...], ...] = ()
    keywords: tuple[tuple[str, tuple[str | None, ...]], ...] = ()
    side: str | None = None  # a deprecation/misuse/error path when every call sits on one
    # Arguments that are elements a caller iterates from the receiver's own attribute: (position
    # after the bound one or keyword, attribute, the caller's entry), as `reach.Call.elements`.
    elements: tuple[tuple[int | str, str, str], ...] = ()
    # Arguments a caller fills with rows sized by the data: (position after the bound one or
    # keyword, sized by a fixed op, the path of that call, callee included, the rows' source), as
    # `reach.Call.sized`.
    sized: tuple[tuple[int | str, bool, tuple[str, ...], tuple], ...] = ()


def _fullgraph(call: ast.Call) -> bool:
    """`torch.compile(..., fullgraph=True)`: a break in what it compiles would raise, not split."""
    return any(
        k.arg == "fullgraph" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )


_OPAQUE_DECORATORS = frozenset({"torch.library.custom_op", "torch.library.triton_op"})


def _opaque_op(fn: FunctionNode, imports: ImportTable) -> bool:
    """A custom op's implementation (`@torch.library.custom_op(...)`, or its `register_fake`):
    dynamo calls the op as one node and never traces its body, so no break or fusion is found
    there (FL106's fix defines such ops in the user's file)."""
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if imports.qualname(target) in _OPAQUE_DECORATORS:
            return True
        if isinstance(target, ast.Attribute) and target.attr in ("register_fake", "register_kernel"):
            return True
    return False


def _is_torch_compile(expr: ast.AST, imports: ImportTable) -> bool:
    if isinstance(expr, ast.Call):
        expr = expr.func
    return imports.qualname(expr) in ("torch.compile", "torch.jit.script")


def module_classes(tree: ast.Module, imports: ImportTable, known: Iterable[str] = ()) -> set[str]:
    """Names of classes in the file that are nn.Modules (directly or through a local base);
    `known`: classes another file's base makes modules (and so their local subclasses)."""

    def module_base(base: ast.expr, classes: dict[str, ast.ClassDef]) -> bool:
        qual = imports.qualname(base) or ""
        local = base.id if isinstance(base, ast.Name) else None
        tail = qual.rsplit(".", 1)[-1] if qual else (local or "")
        return qual.startswith("torch.nn") or (tail.endswith(_MODULE_BASE_SUFFIXES) and local not in classes)

    return local_subclasses(tree, module_base, known)


def local_subclasses(
    tree: ast.Module,
    is_root: Callable[[ast.expr, dict[str, ast.ClassDef]], bool],
    known: Iterable[str] = (),
) -> set[str]:
    """Names of the file's classes with a base that `is_root` accepts (given the file's classes by
    name), or a base that is one of them, directly or through other local classes; `known`: classes
    of the file already counted (another file's base makes them so)."""
    classes = {n.name: n for n in iter_statements(tree) if isinstance(n, ast.ClassDef)}
    found: set[str] = {name for name in known if name in classes}
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name not in found and any(
                (isinstance(base, ast.Name) and base.id in found) or is_root(base, classes)
                for base in cls.bases
            ):
                found.add(name)
                changed = True
    return found


# The methods torch.distributions calls on a distribution or a transform (`TransformedDistribution.
# log_prob` runs each transform's `_inverse` and `log_abs_det_jacobian`): what a user's compiled
# loss or sampler runs, as a module's `forward` is what its call runs.
DISTRIBUTION_ENTRIES = frozenset(
    {"log_prob", "rsample", "sample", "cdf", "icdf", "entropy", "_call", "_inverse", "log_abs_det_jacobian"}
)


# Base classes of packages outside the linted tree whose own `forward` runs named methods of the
# subclass: `torch.compile(metric)` traces those. torchmetrics 1.9.0's `Metric.forward` (metric.py:287)
# calls `_forward_full_state_update` or `_forward_reduce_state_update`, and each runs
# `self.update(*args, **kwargs)` and `self.compute()` (metric.py:328, 344-345, 384-385). Every class
# the package exports is a `Metric` except the two containers named here (checked on 1.9.0).
FRAMEWORK_ENTRIES = {"torchmetrics": frozenset({"update", "compute"})}
_FRAMEWORK_NON_ENTRIES = frozenset({"MetricCollection", "MetricTracker"})
_FRAMEWORK_HELPERS = frozenset({"utilities", "functional"})  # submodules whose classes are no metrics


def innermost_function(functions: Iterable[ModelFunction], line: int) -> ModelFunction | None:
    """The innermost of `functions` whose definition spans `line`."""
    around = [f for f in functions if f.node.lineno <= line <= (f.node.end_lineno or f.node.lineno)]
    return max(around, key=lambda f: f.node.lineno, default=None)


def framework_classes(tree: ast.Module, imports: ImportTable) -> dict[str, frozenset[str]]:
    """Classes of the file that subclass a class of a package in `FRAMEWORK_ENTRIES` (resolved
    through the file's imports), directly or through a local base: class name -> the methods the
    package's `forward` runs."""
    found: dict[str, frozenset[str]] = {}
    for package, entries in FRAMEWORK_ENTRIES.items():

        def framework_base(base: ast.expr, _classes, package=package) -> bool:
            parts = (imports.qualname(base) or "").split(".")
            return (
                len(parts) > 1
                and parts[0] == package
                and parts[-1] not in _FRAMEWORK_NON_ENTRIES
                and not _FRAMEWORK_HELPERS.intersection(parts[1:-1])
            )

        for name in local_subclasses(tree, framework_base):
            found[name] = found.get(name, frozenset()) | entries
    return found


def distribution_classes(tree: ast.Module, imports: ImportTable) -> set[str]:
    """Names of classes in the file that subclass a `torch.distributions` class (`Distribution`,
    `Transform`, `TransformedDistribution`, ...), directly or through a local base."""
    return local_subclasses(
        tree, lambda base, _classes: (imports.qualname(base) or "").startswith("torch.distributions.")
    )


def model_functions(
    tree: ast.Module,
    imports: ImportTable,
    text: str | None = None,
    traced: tuple[str, ...] = (),
    reached: tuple[Reached, ...] = (),
    qualify: Callable[[ast.expr], str | None] | None = None,
) -> list[ModelFunction]:
    """The in-scope functions of a module, each once, in source order.

    `text`, the module's source, lets a file that never mentions `compile` skip the search
    for `torch.compile(fn)` calls (a walk over every expression of the file). `traced` holds
    `name` or `Class.method` patterns (fnmatch) of functions the project compiles elsewhere.
    `reached` holds the functions that entries of other files call; they and their same-file
    callees are in scope with the path from there, unless this file's own entries reach them.
    A module's `forward` that a class decorator swaps away (`dispatchers`) is an entry on the road of
    the option that keeps it, entered after the normal closure so that what a normal entry also calls
    stays normal. `qualify` resolves a name through the file's imports, relative ones included (the
    file's `FileSummary.qualify`); without it only absolute imports resolve.
    """
    modules = module_classes(tree, imports, (r.name[1:] for r in reached if r.name.startswith(MODULE_ROOT)))
    free: dict[str, FunctionNode] = {}
    methods: dict[tuple[str, str], tuple[FunctionNode, ast.ClassDef]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            free[stmt.name] = stmt
    for cls in (n for n in iter_statements(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[(cls.name, stmt.name)] = (stmt, cls)

    found: dict[int, ModelFunction] = {}
    work: list[ModelFunction] = []

    def add(
        fn, cls, reason: str, via=None, given=(), chain=None, side=None, left=(), elements=(), sized=()
    ) -> None:
        if id(fn) not in found and not _opaque_op(fn, imports):
            chain = chain or (f"{cls.name}.{fn.name}" if cls is not None else fn.name,)
            found[id(fn)] = ModelFunction(
                fn, cls, reason, via, given, chain, side, left, elements, sized=sized
            )
            work.append(found[id(fn)])

    distributions = distribution_classes(tree, imports) if methods else set()
    frameworks = framework_classes(tree, imports) if methods else {}
    swapped = swapped_methods(tree, qualify or imports.qualname, text) if modules else {}
    optional: list[tuple[FunctionNode, ast.ClassDef, str]] = []  # swapped-away entries, held
    for (cls_name, name), (fn, cls) in methods.items():
        if name in MODULE_ENTRIES and cls_name in modules and (cls_name, name) in swapped:
            optional.append((fn, cls, option_road(swapped[(cls_name, name)])))
        elif name in MODULE_ENTRIES and cls_name in modules:
            add(fn, cls, "forward")
        elif name in DISTRIBUTION_ENTRIES and cls_name in distributions:
            add(fn, cls, "distribution")
        elif name in frameworks.get(cls_name, ()):
            add(fn, cls, "framework")
    for fn, cls in [*((f, None) for f in free.values()), *methods.values()]:
        if any(_is_torch_compile(d, imports) for d in fn.decorator_list):
            add(fn, cls, "compiled")
    for pattern in traced:
        for name, fn in free.items():
            if fnmatch.fnmatchcase(name, pattern):
                add(fn, None, "configured")
        for (cls_name, name), (fn, cls) in methods.items():
            if fnmatch.fnmatchcase(f"{cls_name}.{name}", pattern):
                add(fn, cls, "configured")
    whole: set[int] = set()  # `build(...)` in `torch.compile(build(...), fullgraph=True)`: see `_close`
    for node in walk(tree) if text is None or _mentions_compile_call(text) else ():
        if isinstance(node, ast.Call) and _is_torch_compile(node.func, imports) and node.args:
            target = node.args[0]
            if isinstance(target, ast.Call) and _fullgraph(node):
                whole.add(id(target))
            if isinstance(target, ast.Name) and target.id in free:
                add(free[target.id], None, "compiled")
            elif isinstance(target, ast.Attribute):
                for fn, cls in _compiled_methods(target, tree, methods):
                    add(fn, cls, "compiled")

    # Memo methods that the constructor fills (`warm_caches`) are entered last, on their road, so
    # that what the normal path also calls stays normal.
    warmed = (
        {
            id(methods[(cls.name, name)][0])
            for cls in {id(c): c for _, c in methods.values()}.values()
            for name in warmed_methods(cls, free, wrappers)
        }
        if methods
        else set()
    )
    held: list[tuple[FunctionNode, ast.ClassDef | None, tuple[str, ...], tuple[str, ...] | None, str]] = []

    def close() -> None:
        """What `work` calls, then what the held calls reach, each on its road."""
        _close(work, add, free, methods, warmed, held, whole)
        while held:
            fn, cls, chain, via, road = held.pop(0)
            add(fn, cls, "called", via, (), chain, road)
            _close(work, add, free, methods, warmed, held, whole)

    close()
    for fn, cls, road in optional:
        add(fn, cls, "forward", side=road)
    close()
    # Roots from other files come after this file's own closure, so that a function both reach
    # keeps no path: its findings belong to this file's entries.
    for root in reached:
        if root.name.startswith((MODULE_ROOT, ALIAS_ROOT)):  # taken into `modules` above, or aliases
            continue
        if root.name.startswith("@"):  # a decorator of another file's entry: its wrappers run
            for wrapper in wrappers(free[root.name[1:]], free) if root.name[1:] in free else ():
                add(wrapper, None, "reached", root.via, (), (*root.via, root.name), root.side)
            continue
        target = free.get(root.name) if "." not in root.name else methods.get(tuple(root.name.split(".", 1)))
        if target is None:
            continue
        fn, cls = (target, None) if "." not in root.name else target
        elements = _elements(fn, cls is not None, root)
        if elements and id(fn) in found:
            known = found[id(fn)]
            found[id(fn)] = replace(known, elements=tuple(sorted({*known.elements, *elements})))
        sized = _sized(fn, cls is not None, root)
        if sized and id(fn) in found:
            known = found[id(fn)]
            found[id(fn)] = replace(known, sized=_joined_sized(known.sized, sized))
        add(
            fn,
            cls,
            "reached",
            root.via,
            _given(fn, cls is not None, root),
            (*root.via, root.name),
            root.side,
            _left(fn, cls is not None, root),
            elements,
            sized,
        )
    close()
    # methods that another file's entry calls too: callers whose guards we do not read
    called_from_outside = {m.split(".", 1)[1] for m in (r.name for r in reached) if "." in m}
    _add_facts(found, free, methods, frozenset(called_from_outside))
    aliases = tuple(sorted(file_aliases(type_aliases(tree), reached).items())) if found else ()
    if aliases:
        found = {key: replace(mf, aliases=aliases) for key, mf in found.items()}
    return sorted(found.values(), key=lambda m: (m.node.lineno, m.node.col_offset))


def _add_facts(found: dict[int, ModelFunction], free: dict, methods: dict, outside: frozenset[str]) -> None:
    """Give each method that only in-scope callers of its own class call (`self.m(...)`) what
    every such call's guards state about `self` (`fuselint.source.guards`). Methods named in
    `outside` (another file's entry calls one of that name) get nothing."""
    sites: dict[int, list[frozenset]] = {}
    for current in list(found.values()):
        for node in live_nodes(current.node):
            if not isinstance(node, ast.Call):
                continue
            for fn, _cls in _handed(node, current, free, methods):  # run by another: no guard known
                sites.setdefault(id(fn), []).append(frozenset())
            if not isinstance(node.func, ast.Attribute):
                continue
            called = _same_file_function(node.func, current, free, methods)
            if called is not None and called[1] is not None and id(called[0]) in found:
                sites.setdefault(id(called[0]), []).append(site_facts(current.node, node))
    for key, known in sites.items():
        mf = found[key]
        if mf.reason != "called" or mf.via is not None or mf.node.name in outside:
            continue  # an entry, or reached from another file: callers we do not see
        facts = common_facts(known)
        if facts:
            found[key] = replace(mf, facts=facts)


def _close(
    work: list[ModelFunction],
    add,
    free: dict,
    methods: dict,
    warmed: set[int] = frozenset(),
    held=None,
    whole: set[int] = frozenset(),
) -> None:
    """Add every same-file function that the functions on `work` call, transitively; a call to a
    warmed memo method (ids in `warmed`) goes to `held` instead, on the `warmed` road, and so does
    a call whose result the file compiles whole (ids of the calls in `whole`, `build(...)` in
    `torch.compile(build(...), fullgraph=True)`), on the `compiled-whole` road, unless its caller
    is on a side road already."""
    while work:
        current = work.pop()
        for decorator in current.node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Name) and target.id in free:
                chain = (*current.chain, f"@{target.id}")
                for wrapper in wrappers(free[target.id], free):
                    add(wrapper, None, "called", current.via, (), chain, current.side)
        for node in live_nodes(current.node):
            if not isinstance(node, ast.Call):
                continue
            called = _same_file_function(node.func, current, free, methods)
            if called is not None:
                fn, cls = called
                chain = (*current.chain, node.func.id if cls is None else f"{cls.name}.{fn.name}")
                if id(fn) in warmed and held is not None and current.side is None:
                    held.append((fn, cls, chain, current.via, WARMED))
                elif id(node) in whole and held is not None and current.side is None:
                    held.append((fn, cls, chain, current.via, COMPILED_WHOLE))
                else:
                    add(fn, cls, "called", current.via, (), chain, current.side)
            for fn, cls in _handed(node, current, free, methods):
                chain = (*current.chain, f"{cls.name}.{fn.name}" if cls is not None else fn.name)
                add(fn, cls, "called", current.via, (), chain, current.side)


# Calls that take a function without running it under the caller's trace: dynamo runs a function
# handed to `torch.compiler.disable` eagerly (FL108 names that call), a hook registered in forward
# runs on later calls if at all, and a container only stores it (`self.hooks.append(self._share)`).
_NOT_RUN_WITH = frozenset({"disable", "Thread", "submit", "append", "appendleft", "extend", "insert",
                           "add", "put", "setdefault", "setattr"})  # fmt: skip


def _handed(
    call: ast.Call, current: ModelFunction, free: dict, methods: dict
) -> Iterable[tuple[FunctionNode, ast.ClassDef | None]]:
    """The same-file functions handed to `call` as arguments, which the callee runs in its place:
    `functools.partial(f, ...)`, `map(f, xs)`, `PitWrapper(cal_si_snr)`, `apply_fn(self._step)`."""
    func = call.func
    callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if callee in _NOT_RUN_WITH or callee.startswith("register"):
        return
    for arg in (*call.args, *(k.value for k in call.keywords)):
        handed = _same_file_function(arg, current, free, methods)
        if handed is not None:
            yield handed


def _same_file_function(
    expr: ast.expr, current: ModelFunction, free: dict, methods: dict
) -> tuple[FunctionNode, ast.ClassDef | None] | None:
    """The same-file function `expr` names: a free function (`f`), or a method of the class
    being linted (`self.m`, defined in that class); None otherwise."""
    if isinstance(expr, ast.Name) and expr.id in free:
        return free[expr.id], None
    if (
        current.cls is not None
        and isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
        and (current.cls.name, expr.attr) in methods
    ):
        return methods[(current.cls.name, expr.attr)]
    return None


def wrappers(decorator: FunctionNode, free: dict[str, FunctionNode] | None = None) -> list[FunctionNode]:
    """The functions a decorator wraps its argument in: the defs nested in it that call a parameter
    of a def around them (`def capture(func): ... def wrapper(*a): ... func(*a)`). They run in place
    of every function the decorator is put on. A decorator that hands its argument on to another
    decorator of the file (`free`) wraps it in that one's wrappers (gpytorch's `cached(method)`
    returns `_cached(method=method, name=name)`, whose nested `g` runs on every call)."""
    found: list[FunctionNode] = []
    for handed_to in _handed_decorators(decorator, free or {}):
        found.extend(w for w in wrappers(handed_to) if w not in found)

    def visit(fn: FunctionNode, outer: frozenset[str]) -> None:
        for inner in _nested_defs(fn):
            own = own_nodes(inner)
            calls = {n.func.id for n in own if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            if calls & outer:
                found.append(inner)
            visit(inner, outer | {a.arg for a in (*inner.args.posonlyargs, *inner.args.args)})

    visit(decorator, frozenset(a.arg for a in (*decorator.args.posonlyargs, *decorator.args.args)))
    return found


def _handed_decorators(decorator: FunctionNode, free: dict[str, FunctionNode]) -> list[FunctionNode]:
    """The other functions of the file that `decorator`'s own body calls with one of its parameters
    (`return _cached(method=method, name=name)`): decorators it delegates to."""
    params = {a.arg for a in (*decorator.args.posonlyargs, *decorator.args.args, *decorator.args.kwonlyargs)}
    found: list[FunctionNode] = []
    for node in own_nodes(decorator):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        callee = free.get(node.func.id)
        handed = {a.id for a in (*node.args, *(k.value for k in node.keywords)) if isinstance(a, ast.Name)}
        if callee is not None and callee is not decorator and callee not in found and handed & params:
            found.append(callee)
    return found


def _nested_defs(fn: FunctionNode) -> list[FunctionNode]:
    """The defs directly inside `fn`'s body (not inside those defs, nor in classes)."""
    return [n for n in own_nodes(fn) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def own_nodes(fn: FunctionNode) -> list[ast.AST]:
    """The nodes of `fn`'s body, the defs nested in it included but not their insides: listed
    once per file's analysis (`nodes.made_once`), the caller never changes the list."""
    return made_once("own nodes", fn, _own_nodes)


def _own_nodes(fn: FunctionNode) -> list[ast.AST]:
    out: list[ast.AST] = []
    for node in fn.body:
        out.append(node)
    for node in out:  # the loop reads what it appends: breadth first
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            out.extend(child_nodes(node))
    return out


def call_parameters(fn: FunctionNode, bound: bool) -> list[str]:
    """The positional parameters a call of `fn` fills, in order: a bound call's `self` left out
    (a staticmethod has none)."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    return params[1:] if bound and not static else params


def _elements(fn: FunctionNode, bound: bool, root: Reached) -> tuple[tuple[str, str, str], ...]:
    """`root.elements` by parameter name of `fn`: (parameter, attribute, caller), sorted."""
    params = call_parameters(fn, bound)
    named = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    found = set()
    for where, attr, caller in root.elements:
        if isinstance(where, int):
            if where < len(params):
                found.add((params[where], attr, caller))
        elif where in named:
            found.add((where, attr, caller))
    return tuple(sorted(found))


def _sized(
    fn: FunctionNode, bound: bool, root: Reached
) -> tuple[tuple[str, bool, tuple[str, ...], tuple], ...]:
    """The parameters of `fn` that a caller fills with rows sized by the data (`Reached.sized`)."""
    params = call_parameters(fn, bound)
    named = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    found = []
    for where, fixed, path, source in root.sized:
        name = params[where] if isinstance(where, int) and where < len(params) else where
        if isinstance(name, str) and name in named:
            found.append((name, fixed, path, source))
    return _joined_sized((), tuple(found))


def _joined_sized(known: tuple, more: tuple) -> tuple:
    """One entry per parameter: sized by a fixed op where some call is, then the shortest path."""
    best: dict[str, tuple] = {}
    for entry in sorted((*known, *more), key=lambda e: (e[0], not e[1], len(e[2]), e[2], repr(e[3]))):
        best.setdefault(entry[0], entry)
    return tuple(best[name] for name in sorted(best))


def _given(fn: FunctionNode, bound: bool, root: Reached) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The kinds callers passed, per parameter name of `fn` (unknown kinds left out)."""
    params = call_parameters(fn, bound)
    kinds: dict[str, set[str]] = {}
    for position, options in enumerate(root.args):
        if position < len(params) and options != (STARRED,):
            kinds.setdefault(params[position], set()).update(k for k in options if k not in (None, STARRED))
    for name, options in root.keywords:
        if name != STARRED:
            kinds.setdefault(name, set()).update(k for k in options if k is not None)
    return tuple((name, tuple(sorted(k))) for name, k in sorted(kinds.items()))


def _left(fn: FunctionNode, bound: bool, root: Reached) -> tuple[tuple[str, object], ...]:
    """The parameters with a constant `True`/`False`/`None` default that no call in `root` passes:
    beyond every call's positional arguments (none starred) and named by no keyword (no `**`)."""
    args = fn.args
    if any(name == STARRED for name, _kinds in root.keywords):
        return ()
    positional = [*args.posonlyargs, *args.args]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    skip = 1 if bound and not static else 0
    starred = any(STARRED in options for options in root.args)
    named = {name for name, _kinds in root.keywords}
    pairs = [
        *(
            (a, d, i)
            for i, (a, d) in enumerate(
                zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True),
                len(positional) - len(args.defaults),
            )
        ),
        *((a, d, None) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)),
    ]
    left = []
    for arg, default, index in pairs:
        if not (isinstance(default, ast.Constant) and isinstance(default.value, (bool, type(None)))):
            continue
        if arg.arg in named:
            continue
        if index is not None and (starred or index - skip < len(root.args)):
            continue
        left.append((arg.arg, default.value))
    return tuple(left)


def _compiled_methods(
    target: ast.Attribute, tree: ast.Module, methods: dict[tuple[str, str], tuple[FunctionNode, ast.ClassDef]]
) -> list[tuple[FunctionNode, ast.ClassDef]]:
    """The methods `torch.compile(x.method)` can mean in this file: `Class.method` when x names a
    class of the file, the enclosing class's for `self.method`, else every class's `method`
    (the object's type is unknown without running the code; a same-named method is the guess)."""
    owner = target.value
    if isinstance(owner, ast.Name) and (owner.id, target.attr) in methods:
        return [methods[(owner.id, target.attr)]]
    if isinstance(owner, ast.Name) and owner.id == "self":
        for cls in (n for n in walk(tree) if isinstance(n, ast.ClassDef)):
            if (cls.name, target.attr) in methods and any(n is target for n in walk(cls)):
                return [methods[(cls.name, target.attr)]]
    return [found for (_cls, name), found in methods.items() if name == target.attr]
