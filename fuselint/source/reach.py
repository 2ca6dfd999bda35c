"""Whole-program reach: which functions of other files the entries of the linted tree call.

A file's own entries (`forward`, compiled functions, configured ones) and their same-file
callees are found by `fuselint.source.scope`. This module follows their calls out of the file:
into functions, classes and methods of other files of the linted tree, resolved through the
imports (`from .x import f`, `from pkg.mod import C`, `import pkg.mod as m`, re-exports in a
package's `__init__`), into callables stored on `self` (`self.processor = Proc()` then
`self.processor(...)` is `Proc.__call__`), into inherited methods and `super()` calls, into
plain classes built or called from an entry (`C(...)` runs `C.__init__`; `c = C(); c(x)` and
`c.step(x)` run `C.__call__` and `C.step`), through dispatch tables (`SOLVERS[method](...)` runs
every function or class the dict holds; the path names `SOLVERS[...]`), and into subclasses'
overrides of a method the class calls on `self` (virtual dispatch: `self._advance(t)` in a base
class runs whichever subclass's `_advance`).

The work is split so that each file is parsed once per round and a cache can keep the rest:
- `summarize` reads what other files need from one file: its module name, imports, functions,
  classes (bases, methods, what `__init__` stores on `self`) — a `FileSummary`;
- `outgoing_calls` lists the calls an analysed file's in-scope functions make that its own
  scope does not follow, with the kinds of their arguments (a tensor or not, from the dataflow)
  and the path from the entry — `Call`s;
- `reach_roots` resolves every file's calls against the summaries of all files (an `Index`) into
  `Reached` roots per file. A file whose roots changed is analysed again with them, which may
  add calls; the linter repeats until nothing changes (a fixpoint).
Everything is sorted, so the same tree gives the same roots and messages in every run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from fuselint.source.aliases import type_aliases
from fuselint.source.dataflow import argument_kind
from fuselint.source.imports import ImportTable, iter_statements, module_statements
from fuselint.source.nodes import child_nodes, grouped, made_once, walk
from fuselint.source.nodes import self_attribute as _self_attr
from fuselint.source.scope import (
    MODULE_ENTRIES,
    MODULE_ROOT,
    STARRED,
    Reached,
    framework_classes,
    module_classes,
)

# Packages that are never part of a linted model tree: calls into them are not worth recording.
_OUTSIDE = frozenset(
    {"torch", "numpy", "math", "warnings", "logging", "typing", "collections", "itertools", "functools",
     "einops", "triton", "os", "sys", "re", "copy", "inspect", "dataclasses", "random", "operator",
     "builtins", "contextlib", "enum", "abc", "json", "time", "types", "weakref", "scipy"}
)  # fmt: skip
_MAX_DEPTH = 8  # re-export chains and base classes followed at most this deep
_MAX_OVERRIDES = 8  # subclasses' definitions of one method that virtual dispatch reaches at most
# Methods a tensor or a module handed to `__init__` has: a call of one on such an object runs torch's.
_TENSOR_OR_MODULE_METHODS = frozenset(
    {"to", "cpu", "cuda", "float", "double", "half", "bfloat16", "long", "int", "bool", "type", "clone",
     "detach", "numpy", "item", "tolist", "size", "dim", "view", "reshape", "contiguous", "train", "eval",
     "parameters", "named_parameters", "modules", "children", "state_dict", "load_state_dict", "apply",
     "register_buffer", "requires_grad_", "zero_grad"}
)  # fmt: skip
_TORCH_ANNOTATION = re.compile(r"\b(Tensor|Module|Parameter|torch)\b")


def outside(qualname: str) -> bool:
    """A name in a package that is never part of a linted model tree (torch, numpy, the stdlib)."""
    return qualname.split(".", 1)[0] in _OUTSIDE


def module_name(path: str | Path) -> tuple[str, bool]:
    """The dotted module a file is (folders with an `__init__.py` are packages), and whether it is
    a package's `__init__`."""
    path = Path(path).resolve()
    package = path.stem == "__init__"
    parts = [] if package else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists() and folder.parent != folder:
        parts.append(folder.name)
        folder = folder.parent
    return ".".join(reversed(parts)) or path.stem, package


class ClassSummary(NamedTuple):
    bases: tuple[str, ...]  # qualified names of the bases that could be resolved
    methods: frozenset[str]
    # self.X -> qualified names of the classes an instance stored there may be built from
    stored: tuple[tuple[str, tuple[str, ...]], ...] = ()
    properties: frozenset[str] = frozenset()  # methods read as attributes (`@property`)
    unbound: frozenset[str] = frozenset()  # static and class methods: `C.m(x)` passes no self
    module: bool = False  # an nn.Module by its own file's evidence (a torch.nn base, a local one...)
    # Methods a framework base of another package runs (`scope.FRAMEWORK_ENTRIES`: a torchmetrics
    # `Metric`'s `update` and `compute`), by its own file's evidence
    entries: frozenset[str] = frozenset()
    # Methods that store each keyword argument on `self` under its name (`setattr(self, k, v)` for
    # `k, v in kwargs.items()`: diffusers' `register_modules`), and the calls `self.m(X=v)` of its
    # methods with the classes each keyword's value may be: (m, X, classes). `Index` joins them
    # across files (the setter is usually a base's).
    keyword_setters: frozenset[str] = frozenset()
    keyword_stores: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # method (or `method[i]`, item i of its tuple) -> the classes of the tree its result is an
    # instance of (`result_classes`)
    returns: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class FileSummary:
    """What other files need to know about one file to resolve calls into it."""

    module: str
    package: bool
    bindings: Mapping[str, str]  # imported name -> absolute qualified name
    functions: frozenset[str]
    classes: Mapping[str, ClassSummary] = field(default_factory=dict)
    # Dispatch tables: a module-level dict assigned once -> the qualified names of its values
    # that are functions or classes (`SOLVERS = {"rk4": RK4, ...}`), sorted; and a factory
    # function -> the functions or classes its returns name (`factory_values`).
    tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # function (or `function[i]`) -> the classes of the tree its result is an instance of
    # (`result_classes`)
    returns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # function or "Class.method" -> what every one of its `return`s calls, whatever its annotation
    # says (`built_returns`): when all are classes, its result is an object the compiled code built
    built: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # module-level type aliases that name a tensor -> their text (`aliases.type_aliases`)
    aliases: Mapping[str, str] = field(default_factory=dict)

    def qualify(self, expr: ast.AST) -> str | None:
        """`C`, `m.f`, `pkg.mod.C` as an absolute qualified name, or None."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        if expr.id in self.classes or expr.id in self.functions:
            head = f"{self.module}.{expr.id}"
        elif expr.id in self.bindings:
            head = self.bindings[expr.id]
        else:
            return None
        return ".".join([head, *reversed(parts)])


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    """The module `from <level dots><name> import ...` names, seen from `module`."""
    if level == 0:
        return name or ""
    parts = module.split(".")
    keep = len(parts) - level + (1 if package else 0)
    base = parts[: max(keep, 0)]
    return ".".join([*base, name] if name else base)


def summarize(
    tree: ast.Module, module: str, package: bool, imports: ImportTable | None = None
) -> FileSummary:
    """What reach needs of a file. `imports`: the tree's `ImportTable`, when the caller has it."""
    bindings: dict[str, str] = {}
    for node in iter_statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    bindings.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, package, node.level, node.module)
            for alias in node.names:
                if alias.name != "*" and base:
                    bindings[alias.asname or alias.name] = f"{base}.{alias.name}"
    # Names bound to torch, numpy or the stdlib never resolve into the tree: not worth keeping.
    bindings = {name: target for name, target in bindings.items() if not outside(target)}
    functions: set[str] = set()
    class_nodes: dict[str, ast.ClassDef] = {}
    dicts: dict[str, list[ast.expr]] = {}  # module-level name -> every value assigned to it
    for stmt in module_statements(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.add(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            class_nodes[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            for target in stmt.targets if isinstance(stmt, ast.Assign) else (stmt.target,):
                if isinstance(target, ast.Name):
                    dicts.setdefault(target.id, []).append(stmt.value)
    summary = FileSummary(module, package, bindings, frozenset(functions), {})
    # The instances a class stores on `self` may be of the file's own classes (`self.u = Updater()`).
    named = {name: ClassSummary((), frozenset()) for name in class_nodes}
    local = FileSummary(module, package, bindings, frozenset(functions), named)
    if not class_nodes:
        imports = None
    elif imports is None:
        imports = ImportTable.of(tree)
    modules = module_classes(tree, imports) if imports is not None else set()
    frameworks = framework_classes(tree, imports) if imports is not None else {}
    classes = {
        name: _class_summary(node, summary, local)._replace(
            module=name in modules, entries=frameworks.get(name, frozenset())
        )
        for name, node in sorted(class_nodes.items())
    }
    summary = FileSummary(module, package, bindings, frozenset(functions), classes)
    tables = {}
    for name, values in sorted(dicts.items()):
        found = table_values(values[0], summary) if len(values) == 1 else ()
        if found:
            tables[name] = found
    for stmt in module_statements(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name not in tables:
            found = factory_values(stmt, summary)
            if found:
                tables[stmt.name] = found
    returns = {}
    built = {}
    for stmt in module_statements(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            returns.update(result_classes(stmt, local))
            if found := built_returns(stmt, local):
                built[stmt.name] = found
    for name, node in sorted(class_nodes.items()):
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                own = f"{module}.{name}" if _decorated(stmt, "classmethod") else None
                if found := built_returns(stmt, local, own):
                    built[f"{name}.{stmt.name}"] = found
    aliases = type_aliases(tree)
    return FileSummary(
        module, package, bindings, frozenset(functions), classes, tables, returns, built, aliases
    )


_UNBOUND = ("staticmethod", "classmethod")


def built_returns(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, summary: FileSummary, own: str | None = None
) -> tuple[str, ...]:
    """What every `return` of `fn` calls, sorted, its annotation left aside: `return C(...)`,
    `return A(...) if x else B(...)`, a local every assignment of which is such a call (`out =
    C(...); return out`), and in a class method `own`, the class `cls(...)`. () when any return
    gives something else (`return self`, a stored object, an argument) or a decorator wraps `fn`.
    When all are classes of the tree (`unresumable` asks the `Index`), dynamo treats the result as
    an object the compiled code built (bench/reach21_toys.py)."""
    returns = own_returns(fn)
    others = [d for d in fn.decorator_list if not (isinstance(d, ast.Name) and d.id in _UNBOUND)]
    if not returns or others:  # a decorator may hand back what it keeps (`functools.cache`)
        return ()
    first = (*fn.args.posonlyargs, *fn.args.args)[:1]
    maker = first[0].arg if own and first else None

    def made(expr: ast.expr | None, local: dict[str, list[str]]) -> list[str]:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == maker:
            return [own]
        if isinstance(expr, ast.IfExp):  # both arms must build
            body, orelse = made(expr.body, local), made(expr.orelse, local)
            return body + orelse if body and orelse else []
        return _constructed(expr, summary, local)

    assigned: dict[str, list[str]] = {}  # local -> the classes its assignments build
    poisoned: set[str] = set()  # locals bound otherwise at least once
    for node in iter_statements(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            built = made(node.value, {}) if isinstance(node.value, ast.Call) else []
            if built:
                assigned.setdefault(node.targets[0].id, []).extend(built)
            else:
                poisoned.add(node.targets[0].id)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With)):
            for target in walk(node):
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    poisoned.add(target.id)
    local = {name: built for name, built in assigned.items() if name not in poisoned}
    found: set[str] = set()
    for node in returns:
        built = made(node.value, local)
        if not built or any(outside(q) for q in built):
            return ()
        found.update(built)
    return tuple(sorted(found))


def returned_classes(fn: ast.FunctionDef | ast.AsyncFunctionDef, summary: FileSummary) -> tuple[str, ...]:
    """The classes of the tree a function's result is an instance of, sorted: those its return
    annotation names (`-> LinearOperator`, `-> "A | None"`), else those its returns build when
    every `return` builds one (`return Cls(...)`, `return A(...) if x else B(...)`). A method
    called on the result runs that class's definition (`Index.targets`, form "instance")."""
    if fn.returns is not None:
        return tuple(sorted(set(_annotated_classes(fn.returns, summary))))
    found: set[str] = set()
    for node in own_returns(fn) or ():
        built = _constructed(node.value, summary, {})
        if not built or any(outside(q) for q in built):
            return ()
        found.update(built)
    return tuple(sorted(found))


def result_classes(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, summary: FileSummary
) -> dict[str, tuple[str, ...]]:
    """What `FileSummary.returns` and `ClassSummary.returns` keep of a function: under its name the
    classes its result is (`returned_classes`), under `name[i]` those of item i of a tuple it
    returns (`a, b = f(...)`: `tuple_items`)."""
    found = {fn.name: classes} if (classes := returned_classes(fn, summary)) else {}
    found.update((f"{fn.name}[{i}]", classes) for i, classes in tuple_items(fn, summary))
    return found


def tuple_items(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, summary: FileSummary
) -> list[tuple[int, tuple[str, ...]]]:
    """Per item of the tuple a function returns, the classes of the tree it is an instance of:
    those the annotation names (`-> tuple[A, B]`, `Tuple[A, B]`), else those every `return a, b`
    builds at that position. Items of unknown class are left out."""
    annotation = fn.returns
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return []
    if annotation is not None:
        wrapper = annotation.value if isinstance(annotation, ast.Subscript) else None
        name = wrapper.attr if isinstance(wrapper, ast.Attribute) else getattr(wrapper, "id", None)
        if name not in ("tuple", "Tuple") or not isinstance(annotation.slice, ast.Tuple):
            return []
        items = annotation.slice.elts
        if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in items):
            return []  # `tuple[A, ...]`: no position is known
        found = [(i, tuple(sorted(set(_annotated_classes(e, summary))))) for i, e in enumerate(items)]
        return [(i, classes) for i, classes in found if classes]
    returns = own_returns(fn) or ()
    if not returns or not all(isinstance(r.value, ast.Tuple) for r in returns):
        return []
    if len({len(r.value.elts) for r in returns}) != 1:
        return []
    out = []
    for i in range(len(returns[0].value.elts)):
        built = [_constructed(r.value.elts[i], summary, {}) for r in returns]
        if all(b and not any(outside(q) for q in b) for b in built):
            out.append((i, tuple(sorted({q for b in built for q in b}))))
    return out


def own_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[ast.Return, ...] | None:
    """The function's own `return` statements (a nested definition's returns are its own); None
    for a generator, whose call returns no value of its `return`s. Listed once per file's
    analysis: a summary asks for them three times per function."""
    return made_once("own returns", fn, _returns_of)


_INNER_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _returns_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[ast.Return, ...] | None:
    groups = grouped(fn)
    nested = sum(len(groups.get(kind, ())) for kind in _INNER_SCOPES) - 1  # `fn` is in its own walk
    if not nested and ast.Yield not in groups and ast.YieldFrom not in groups:
        # Every return of the walk is the function's own (a return is a statement: none sits in
        # a decorator or default). Callers read them as a set, in any order.
        return tuple(groups.get(ast.Return, ()))
    found: list[ast.Return] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _INNER_SCOPES):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return None
        if isinstance(node, ast.Return):
            found.append(node)
        todo.extend(child_nodes(node))
    return tuple(found)


def factory_values(fn: ast.FunctionDef | ast.AsyncFunctionDef, summary: FileSummary) -> tuple[str, ...]:
    """The classes or functions of the tree a factory function returns, sorted: every `return`
    names one (torchsde's `methods.select(method, sde_type)` returns `Euler`, `SRK`, ...), so
    calling its result may run any of them, as a dispatch table's. () for any other function."""
    found: set[str] = set()
    for node in own_returns(fn) or ():
        qual = summary.qualify(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        if qual is None or outside(qual):
            return ()
        found.add(qual)
    return tuple(sorted(found))


def table_values(expr: ast.expr, summary: FileSummary) -> tuple[str, ...]:
    """The qualified names of the functions and classes a dict display (`{"a": f, "b": C}`) or
    `dict(a=f, b=C)` holds as values, sorted; () when it is no dict or holds none."""
    if isinstance(expr, ast.Dict):
        values = expr.values
    elif (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "dict"
        and not expr.args
    ):
        values = [k.value for k in expr.keywords if k.arg is not None]
    else:
        return ()
    found = {summary.qualify(v) for v in values if isinstance(v, (ast.Name, ast.Attribute))}
    return tuple(sorted(q for q in found if q and not outside(q)))


def _constructed(expr: ast.expr | None, summary: FileSummary, local: dict[str, list[str]]) -> list[str]:
    """Qualified names of the classes `expr` builds: `C(...)`, `A() if x else B()`, a local bound so."""
    if isinstance(expr, ast.Call):
        qual = summary.qualify(expr.func)
        return [qual] if qual else []
    if isinstance(expr, ast.IfExp):
        return _constructed(expr.body, summary, local) + _constructed(expr.orelse, summary, local)
    if isinstance(expr, ast.Name):
        return local.get(expr.id, [])
    return []


def _decorated(method: ast.FunctionDef | ast.AsyncFunctionDef, *names: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id in names for d in method.decorator_list)


def _class_summary(cls: ast.ClassDef, summary: FileSummary, local: FileSummary | None = None) -> ClassSummary:
    """Bases, methods, and the classes of the callables the class stores on `self`, directly
    (`self.p = Proc()`) or through a setter (`self.set_processor(Proc())` storing its argument).
    `local` also resolves the file's own classes: what is stored, and bases of the same file
    (`class C(B)` with `class B(OtherFileBase)` beside it: C's lookup order goes on through B into
    the other file, where an inherited `forward` or a subclass's override lies)."""
    local = local or summary
    bases = tuple(q for q in (local.qualify(b) for b in cls.bases) if q)
    methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    stored: dict[str, set[str]] = {}
    setters: dict[str, list[tuple[int, str]]] = {}  # method -> (parameter position, attribute)
    handed: list[tuple[str, list[list[str]]]] = []  # self.method(args) with the classes each arg builds
    keyword_calls: dict[tuple[str, str], set[str]] = {}
    for method in methods:
        params = [a.arg for a in (*method.args.posonlyargs, *method.args.args)][1:]
        # A parameter annotated with a class of the tree holds an instance of it (a hint for which
        # class a stored callee is: what a call on it finds is decided by that class's own code).
        names: dict[str, list[str]] = {
            a.arg: found
            for a in (*method.args.posonlyargs, *method.args.args, *method.args.kwonlyargs)[1:]
            if a.annotation is not None and (found := _annotated_classes(a.annotation, local))
        }
        # Statements only (no expression walk): summaries are made for every file of the tree.
        for node in sorted(iter_statements(method), key=lambda n: (n.lineno, n.col_offset)):
            if isinstance(node, ast.Expr):
                node = node.value
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                built = _constructed(node.value, local, names)
                if isinstance(target, ast.Name) and built:
                    names.setdefault(target.id, []).extend(built)
                attr = _self_attr(target)
                if attr is not None:
                    if built:
                        stored.setdefault(attr, set()).update(built)
                    if isinstance(node.value, ast.Name) and node.value.id in params:
                        setters.setdefault(method.name, []).append((params.index(node.value.id), attr))
            elif isinstance(node, ast.Call) and _self_attr(node.func) is not None:
                handed.append((node.func.attr, [_constructed(a, local, names) for a in node.args]))
                for keyword in node.keywords:
                    built = _constructed(keyword.value, local, names) if keyword.arg else []
                    if built:
                        keyword_calls.setdefault((node.func.attr, keyword.arg), set()).update(built)
    for name, args in handed:
        for position, attr in setters.get(name, ()):
            if position < len(args) and args[position]:
                stored.setdefault(attr, set()).update(args[position])

    properties = frozenset(m.name for m in methods if _decorated(m, "property"))
    unbound = frozenset(m.name for m in methods if _decorated(m, *_UNBOUND))
    return ClassSummary(
        bases,
        frozenset(m.name for m in methods),
        tuple(
            (attr, tuple(sorted(q for q in found if not outside(q))))
            for attr, found in sorted(stored.items())
            if any(not outside(q) for q in found)
        ),
        properties,
        unbound,
        keyword_setters=frozenset(m.name for m in methods if _stores_keywords(m)),
        returns=tuple(item for m in methods for item in result_classes(m, local).items()),
        keyword_stores=tuple(
            (method, attr, tuple(sorted(q for q in found if not outside(q))))
            for (method, attr), found in sorted(keyword_calls.items())
            if any(not outside(q) for q in found)
        ),
    )


def _annotated_classes(annotation: ast.expr, summary: FileSummary) -> list[str]:
    """The classes of the tree an annotation names: `C`, `m.C`, `A | B`, `Optional[C]`, `Union[A, B]`
    (a string annotation is read as the expression it holds)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return []
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _annotated_classes(annotation.left, summary) + _annotated_classes(annotation.right, summary)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, (ast.Name, ast.Attribute)):
        wrapper = (
            annotation.value.attr if isinstance(annotation.value, ast.Attribute) else annotation.value.id
        )
        if wrapper in ("Optional", "Union"):
            inner = annotation.slice
            parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return [q for part in parts for q in _annotated_classes(part, summary)]
        return []
    if isinstance(annotation, (ast.Name, ast.Attribute)):
        qual = summary.qualify(annotation)
        return [qual] if qual and not outside(qual) else []
    return []


def _stores_keywords(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`def m(self, **kwargs)` with `for k, v in kwargs.items(): ... setattr(self, k, v)`: a call
    `self.m(X=value)` stores `value` as `self.X`."""
    kwargs = method.args.kwarg.arg if method.args.kwarg is not None else None
    if kwargs is None:
        return False
    # A loop is a statement: the statements' walk finds every one (`walk` lists every expression).
    for loop in iter_statements(method):
        if not (
            isinstance(loop, ast.For)
            and isinstance(loop.target, ast.Tuple)
            and len(loop.target.elts) == 2
            and all(isinstance(e, ast.Name) for e in loop.target.elts)
            and isinstance(loop.iter, ast.Call)
            and isinstance(loop.iter.func, ast.Attribute)
            and loop.iter.func.attr == "items"
            and isinstance(loop.iter.func.value, ast.Name)
            and loop.iter.func.value.id == kwargs
            and not loop.iter.args
        ):
            continue
        key, value = (e.id for e in loop.target.elts)
        for node in walk(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and len(node.args) == 3
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "self"
                and [getattr(a, "id", None) for a in node.args[1:]] == [key, value]
            ):
                return True
    return False


# ---------------------------------------------------------------- calls out of a file


class Call(NamedTuple):
    """A call an in-scope function makes that its file's scope does not follow.

    `form` says how to resolve it: "name" (`qualname` is a function or class; calling a class
    builds it), "self" (method or stored callable `attr` of the caller's class `qualname`),
    "super" (`attr` of a base of `qualname`), "instance" (method `attr` of an instance of class
    `qualname`), "property" (reading `attr` of an instance of `qualname` runs its getter),
    "decorator" (function `qualname` decorates the caller: the wrapper it returns runs instead),
    "table" (every function or class that the dispatch table `qualname` holds is called:
    `TABLE[key](...)`), "table_instance" (method `attr` of an instance built from that table),
    "override" (`self.attr(...)` in class `qualname`: the definitions of `attr` in its subclasses),
    "inherits" (`self.m(...)` in the `forward` of class `qualname`, `attr` "forward.m": the
    definitions of `m` in the subclasses that run that same `forward`, however many),
    "stored" (`self.X.m(...)` in class `qualname`, `attr` "X.m": method m of the classes the
    class stores on `self.X`), "named" (`obj._m(...)` on an object of unknown class: every
    method `attr` of the tree's classes, `_named`).
    `via` is the path from the entry to the caller, caller included."""

    form: str
    qualname: str
    attr: str
    args: tuple[str | None, ...]
    keywords: tuple[tuple[str, str | None], ...]
    via: tuple[str, ...]
    side: str | None = None  # the side road the call sits on (`fuselint.source.paths`), if any
    # Arguments that are elements the caller iterates from the receiver's own attribute, as
    # (position or keyword, attribute): `for t in self.scheduler.timesteps:
    # self.scheduler.step(out, t, x)` gives ((1, "timesteps"),). The callee's class decides what
    # they are (`dataflow.iterated_parameters`): the elements of its tensor `self.timesteps`.
    elements: tuple[tuple[int | str, str], ...] = ()
    # Arguments that hold rows sized by the data (`sized_calls`): (position or keyword, sized by
    # one of FL106's fixed ops, their source). The callee's parameter is data-sized in this call only.
    sized: tuple[tuple[int | str, bool, tuple], ...] = ()


def function_name(fn) -> str:
    return f"{fn.cls.name}.{fn.node.name}" if fn.cls is not None else fn.node.name


def entry_path(path: str, fn) -> tuple[str, ...]:
    """The path from the entry to `fn`, `fn` included: the entry named with its file (`path`) when
    this file's own entry reaches it, else the path another file's entry took (`fn.chain`)."""
    chain = fn.chain or (function_name(fn),)
    return (f"{path}:{chain[0]}", *chain[1:]) if fn.via is None else chain


def outgoing_calls(
    path: str,
    flows: list,
    summary: FileSummary,
    sized: Mapping[int, tuple[tuple[int | str, bool, tuple], ...]] | None = None,
) -> tuple[Call, ...]:
    """The calls out of a file's analysed functions (`flows`), with their arguments' kinds and, in
    `sized` (by the call node's id), which of them hold rows sized by the data."""
    found: set[Call] = set()
    assigned: dict[int, frozenset[str]] = {}  # class node id -> the attributes its methods set on self
    handed_by: dict[int, frozenset[str]] = {}  # class node id -> what `__init__` stores as handed
    for flow in flows:
        fn = flow.fn
        if fn.cls is not None and id(fn.cls) not in assigned:
            assigned[id(fn.cls)] = _self_assigned(fn.cls)
        values = assigned.get(id(fn.cls), frozenset())
        via = entry_path(path, fn)
        owner = f"{summary.module}.{fn.cls.name}" if fn.cls is not None else None
        tables = _local_tables(flow, summary)
        aliases = _local_aliases(flow, summary)
        made = _factory_results(flow, summary)
        if fn.cls is not None and id(fn.cls) not in handed_by:
            handed_by[id(fn.cls)] = _stored_arguments(fn.cls)
        handed = handed_by.get(id(fn.cls), frozenset())
        instances = _annotated_parameters(fn.node, summary, flow)
        _local_values(flow, summary, owner, values, tables, made, instances)
        iterated = _iterated_attributes(flow)
        called = {id(site.node.func) for site in flow.of(ast.Call)}
        for site in flow.of(ast.Attribute):
            node = site.node
            if (
                id(node) in called
                or not isinstance(node.ctx, ast.Load)
                or not isinstance(node.value, ast.Name)
            ):
                continue
            if node.value.id == "self" and owner is not None:
                base = owner
            elif node.value.id in instances and len(instances[node.value.id]) == 1:
                form, base, _label = instances[node.value.id][0]
                if form != "instance":
                    continue
            else:
                continue
            if _may_read_property(summary, base, node.attr):
                found.add(Call("property", base, node.attr, (), (), via, site.path or fn.side))
        for decorator in fn.node.decorator_list:
            # `@capture_outputs` (or `@capture_outputs(...)`) on an entry: the wrapper the decorator
            # returns runs on every call of the entry, so it is reached (`Index.targets`).
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Name) and target.id in summary.functions:
                continue  # same-file decorator: the file's own scope follows it
            qual = summary.qualify(target)
            if qual and not outside(qual):
                found.add(Call("decorator", qual, "", (), (), via, fn.side))
        for site in flow.of(ast.Call):
            targets = [
                t
                for t in _call_targets(
                    site.node.func,
                    summary,
                    flow.methods,
                    owner,
                    instances,
                    tables,
                    values,
                    aliases,
                    made,
                    handed,
                    fn.node.name,
                )
                if not outside(t[1])
            ]
            if not targets:
                continue
            args: list[str | None] = []
            for arg in site.node.args:
                if isinstance(arg, ast.Starred):
                    args.append(STARRED)  # the positions from here on are unknown
                    break
                args.append(argument_kind(flow, arg, site.env))
            keywords = tuple(
                (k.arg, argument_kind(flow, k.value, site.env)) if k.arg is not None else (STARRED, None)
                for k in site.node.keywords
            )
            elements = _iterated_arguments(site.node, iterated) if iterated else ()
            rows = sized.get(id(site.node), ()) if sized else ()
            for form, qualname, attr, label in targets:
                through = (*via, label) if label else via
                kept = elements if form == "stored" else ()
                found.add(
                    Call(
                        form, qualname, attr, tuple(args), keywords, through, site.path or fn.side, kept, rows
                    )
                )
    return tuple(sorted(found, key=_call_key))


def _call_key(call: Call) -> tuple:
    return (
        call.form,
        call.qualname,
        call.attr,
        call.via,
        repr(call.args),
        repr(call.keywords),
        call.side or "",
        repr(call.elements),
        repr(call.sized),
    )


# Calls whose iteration yields the items of their one iterable: a progress bar (tqdm's, or a
# method named `progress_bar`, FL108's bars: compiled, its fix iterates the items themselves).
_PASS_THROUGH = frozenset({"tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.std.tqdm", "tqdm.notebook.tqdm"})


def _iterated_source(iterable: ast.expr, flow) -> ast.expr:
    """The iterable a `for` really walks: `self.progress_bar(ts)` and `tqdm(ts)` walk `ts`."""
    if (
        isinstance(iterable, ast.Call)
        and len(iterable.args) == 1
        and not isinstance(iterable.args[0], ast.Starred)
    ):
        func = iterable.func
        bar = isinstance(func, ast.Attribute) and func.attr == "progress_bar"
        if bar or flow.imports.qualname(func) in _PASS_THROUGH:
            return iterable.args[0]
    return iterable


def _attribute_aliases(flow) -> dict[str, ast.Attribute]:
    """Names every assignment of the function binds to one attribute of a stored object
    (`timesteps = self.scheduler.timesteps`, in each branch): name -> that attribute."""
    values: dict[str, list[ast.expr]] = {}
    for site in flow.of(ast.Assign):
        stmt = site.node
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            values.setdefault(stmt.targets[0].id, []).append(stmt.value)
    found = {}
    for name, exprs in values.items():
        first = exprs[0]
        if (
            isinstance(first, ast.Attribute)
            and _self_attr(first.value) is not None
            and len(exprs) == flow.assigned.get(name)
            and len({ast.dump(e) for e in exprs}) == 1
        ):
            found[name] = first
    return found


def _iterated_attributes(flow) -> dict[str, tuple[str, str]]:
    """Names bound only by a `for` over an attribute of a stored object, `for t in
    self.X.A` (or `for i, t in enumerate(...)`, through a progress bar, or over a name bound only
    to `self.X.A`), as name -> (X, A)."""
    found: dict[str, tuple[str, str]] = {}
    aliases = _attribute_aliases(flow) if flow.of(ast.For) else {}
    for site in flow.of(ast.For):
        target, iterable = site.node.target, site.node.iter
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Name)
            and iterable.func.id == "enumerate"
            and len(iterable.args) == 1
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
        ):
            target, iterable = target.elts[1], iterable.args[0]
        iterable = _iterated_source(iterable, flow)
        if isinstance(iterable, ast.Name) and iterable.id in aliases:
            iterable = aliases[iterable.id]
        if not (isinstance(target, ast.Name) and isinstance(iterable, ast.Attribute)):
            continue
        receiver = _self_attr(iterable.value)
        if receiver is not None and flow.assigned.get(target.id) == 1:
            found[target.id] = (receiver, iterable.attr)
    return found


def _iterated_arguments(
    call: ast.Call, iterated: Mapping[str, tuple[str, str]]
) -> tuple[tuple[int | str, str], ...]:
    """The arguments of `self.X.m(...)` that are elements the caller iterates from `self.X.A`."""
    receiver = _self_attr(call.func.value) if isinstance(call.func, ast.Attribute) else None
    if receiver is None:
        return ()
    found: list[tuple[int | str, str]] = []
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if isinstance(arg, ast.Name) and iterated.get(arg.id, ("",))[0] == receiver:
            found.append((position, iterated[arg.id][1]))
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg and isinstance(value, ast.Name) and iterated.get(value.id, ("",))[0] == receiver:
            found.append((keyword.arg, iterated[value.id][1]))
    return tuple(found)


Target = tuple[str, str, str, "str | None"]  # form, qualname, attr, a label for the path


def _local_tables(flow, summary: FileSummary) -> dict[str, tuple[str, ...]]:
    """The dicts of functions or classes a function assigns once to a name (`table = {...}`)."""
    tables = {}
    for site in flow.of(ast.Assign):
        stmt = site.node
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            values = table_values(stmt.value, summary)
            if values and flow.assigned.get(name) == 1:
                tables[name] = values
    return tables


def _local_aliases(flow, summary: FileSummary) -> dict[str, tuple[str, ...]]:
    """Names a function binds only to functions or classes of other modules, each assignment one
    of them (nflows' `spline_fn = splines.rational_quadratic_spline` in one branch,
    `splines.unconstrained_rational_quadratic_spline` in the other): a call of the name may run any."""
    found: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for site in flow.of(ast.Assign):
        stmt = site.node
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            continue
        name = stmt.targets[0].id
        counts[name] = counts.get(name, 0) + 1
        if isinstance(stmt.value, (ast.Name, ast.Attribute)):
            qual = summary.qualify(stmt.value)
            if qual and not outside(qual) and not qual.startswith(f"{summary.module}."):
                found.setdefault(name, set()).add(qual)
                continue
        found.setdefault(name, set()).add("")  # bound to something else too: not followed
    return {
        name: tuple(sorted(quals))
        for name, quals in sorted(found.items())
        if "" not in quals and counts[name] == flow.assigned.get(name, counts[name])
    }


def _factory_results(flow, summary: FileSummary) -> dict[str, tuple[str, str]]:
    """Names a function binds once to the result of a call of another function of the tree
    (`solver_fn = methods.select(method=m)`), with that function's qualified name and a label for
    the path: where it is a factory (`factory_values`), calling the name builds or calls whatever
    it returns (`Index.table`); for any other function the name resolves to nothing."""
    found = {}
    for site in flow.of(ast.Assign):
        stmt = site.node
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            continue
        name = stmt.targets[0].id
        if isinstance(stmt.value, ast.Call) and flow.assigned.get(name) == 1:
            func = stmt.value.func
            qual = summary.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
            if qual and not outside(qual):
                found[name] = (qual, f"{name} = {ast.unparse(func)}(...)")
    return found


def _self_assigned(cls: ast.ClassDef) -> frozenset[str]:
    """The attributes the class's methods set on `self` (`self.proj = ...`, `self.x: T = ...`)."""
    found = set()
    for node in walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                found.add(node.attr)
    return frozenset(found)


def _dispatch(
    func: ast.expr,
    summary: FileSummary,
    tables: Mapping[str, tuple[str, ...]],
    made: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[str, str, tuple[str, ...]] | None:
    """For a callee taken from a dispatch table, `TABLE[key]` or `TABLE.get(key)`: the label the
    path shows (`TABLE[...]`), and "name" with the table's values when the function holds the table,
    or "table" with the table's qualified name for `Index` to resolve (a module-level table of this
    file or of another one). A name bound to a factory's result (`made`) is a table's value too."""
    if made and isinstance(func, ast.Name) and func.id in made:
        qual, label = made[func.id]
        return label, "table", (qual,)
    if isinstance(func, ast.Subscript):
        table = func.value
    elif (
        isinstance(func, ast.Call)
        and isinstance(func.func, ast.Attribute)
        and func.func.attr == "get"
        and func.args
    ):
        table = func.func.value
    else:
        return None
    if not isinstance(table, (ast.Name, ast.Attribute)):
        return None
    label = f"{ast.unparse(table)}[...]"
    if isinstance(table, ast.Name) and table.id in tables:
        return label, "name", tables[table.id]
    if isinstance(table, ast.Name) and table.id in summary.tables:
        return label, "table", (f"{summary.module}.{table.id}",)
    qual = summary.qualify(table)
    if qual is None or outside(qual) or (isinstance(table, ast.Name) and table.id not in summary.bindings):
        return None
    return label, "table", (qual,)


def _built(
    expr: ast.expr,
    summary: FileSummary,
    tables: Mapping[str, tuple[str, ...]],
    made: Mapping[str, tuple[str, str]] | None = None,
) -> list[tuple[str, str, str | None]]:
    """What `x = expr` makes `x`: an instance of one class (`C(...)`), or of whichever class a
    dispatch table holds (`TABLE[key](...)`) or a factory returns (`made`), as (form, qualname,
    label) for `x.m(...)`."""
    if isinstance(expr, ast.Call):
        dispatch = _dispatch(expr.func, summary, tables, made)
        if dispatch is not None:
            label, form, names = dispatch
            return [("table_instance" if form == "table" else "instance", q, label) for q in names]
    built = _constructed(expr, summary, {})
    return [("instance", built[0], None)] if len(built) == 1 else []


def _local_values(
    flow,
    summary: FileSummary,
    owner: str | None,
    values: frozenset[str],
    tables: Mapping[str, tuple[str, ...]],
    made: Mapping[str, tuple[str, str]],
    instances: dict[str, list[tuple[str, str, str | None]]],
) -> None:
    """Value flow for method dispatch, into `instances`: a local is an instance of whatever every
    assignment to it gives (`_value_of`), in source order, so that `covar = covar.evaluate_kernel()`
    reads what `covar` was; `a, b = f(...)` gives item i of f's tuple, `a, b = x, y` each its own."""
    for site in sorted(flow.of(ast.Assign), key=lambda site: (site.node.lineno, site.node.col_offset)):
        stmt = site.node
        if len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name):
            pairs = [(target.id, _value_of(value, summary, owner, values, tables, made, instances))]
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
                pairs = [
                    (e.id, _value_of(v, summary, owner, values, tables, made, instances))
                    for e, v in zip(target.elts, value.elts, strict=True)
                ]
            else:
                whole = _value_of(value, summary, owner, values, tables, made, instances)
                pairs = [
                    (
                        e.id,
                        [("instance", f"{q}[{i}]", label) for form, q, label in whole if form == "instance"],
                    )
                    for i, e in enumerate(target.elts)
                ]
        else:
            continue
        for name, found in pairs:
            if found:
                known = instances.setdefault(name, [])
                known.extend(f for f in found if f not in known)


def _value_of(
    expr: ast.expr,
    summary: FileSummary,
    owner: str | None,
    values: frozenset[str],
    tables: Mapping[str, tuple[str, ...]],
    made: Mapping[str, tuple[str, str]] | None,
    instances: Mapping[str, list[tuple[str, str, str | None]]],
) -> list[tuple[str, str, str | None]]:
    """What class `expr`'s value is an instance of, as (form, qualname, label) for `Index`: a class
    built (`_built`), `self.m(...)`'s result, and, on a value whose class is known (`self` or a
    local of `instances`), a method's or a stored callable's result (`x.m(...)`: "X.m",
    `self.lik(...)`: "Owner.lik.__call__") or an attribute read (`x.p`, `self.p`: a property's
    result or what is stored there). [] when unknown."""
    built = _built(expr, summary, tables, made) or _self_result(expr, owner, values)
    if built:
        return built
    call = expr.func if isinstance(expr, ast.Call) else None
    if call is not None and owner is not None and (stored := _self_attr(call)) is not None:
        return [("instance", f"{owner}.{stored}.__call__", None)]  # `_self_result` took the methods
    # `x.m(...)` gives what member m's call gives; `x.p` what reading member p gives
    member = call if call is not None else expr if isinstance(expr, ast.Attribute) else None
    if not isinstance(member, ast.Attribute) or not isinstance(member.ctx, ast.Load):
        return []
    return [
        ("instance", f"{q}.{member.attr}", label) for _, q, label in _receiver(member.value, owner, instances)
    ]


def _receiver(
    expr: ast.expr, owner: str | None, instances: Mapping[str, list[tuple[str, str, str | None]]]
) -> list[tuple[str, str, str | None]]:
    """The known classes of a receiver: `self` is the caller's class; a local, what `instances`
    holds (only the "instance" form: a table's classes are resolved by `Index.targets` alone)."""
    if isinstance(expr, ast.Name) and expr.id == "self":
        return [("instance", owner, None)] if owner is not None else []
    if isinstance(expr, ast.Name):
        return [f for f in instances.get(expr.id, ()) if f[0] == "instance"]
    return []


def _annotated_parameters(fn, summary: FileSummary, flow) -> dict[str, list[tuple[str, str, str | None]]]:
    """Parameters annotated with classes of the tree and never rebound (`def f(op: LinearOperator)`):
    a method called on one runs that class's definition, as on an instance built there."""
    args = fn.args
    return {
        a.arg: [("instance", q, None) for q in found]
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
        if a.annotation is not None
        and a.arg != "self"
        and flow.assigned.get(a.arg, 0) <= 1  # the parameter itself, never rebound
        and (found := sorted(set(_annotated_classes(a.annotation, summary))))
    }


def _self_result(
    expr: ast.expr, owner: str | None, values: frozenset[str]
) -> list[tuple[str, str, str | None]]:
    """`self.m(...)`: an instance of what method `m` of the caller's class returns (`Index.
    instance_classes`), as `_built` gives it; [] for anything else, or a callable stored on self."""
    method = _self_attr(expr.func) if isinstance(expr, ast.Call) else None
    if owner is not None and method is not None and method not in values:
        return [("instance", f"{owner}.{method}", None)]
    return []


def _call_targets(
    func: ast.expr,
    summary: FileSummary,
    methods: frozenset[str],
    owner: str | None,
    instances: Mapping[str, list[tuple[str, str, str | None]]],
    tables: Mapping[str, tuple[str, ...]],
    values: frozenset[str] = frozenset(),
    aliases: Mapping[str, tuple[str, ...]] | None = None,
    made: Mapping[str, tuple[str, str]] | None = None,
    values_handed: frozenset[str] | None = None,
    caller: str | None = None,
) -> list[Target]:
    dispatch = _dispatch(func, summary, tables, made)
    if dispatch is not None:
        label, form, names = dispatch
        return [(form, q, "", label) for q in names]
    if isinstance(func, ast.Name):
        if func.id in summary.functions:
            return []  # same-file function: the file's own scope follows it
        if func.id in instances:
            return [(form, q, "__call__", label) for form, q, label in instances[func.id]]
        if aliases and func.id in aliases:
            return [("name", q, "", f"{func.id} = {q.rsplit('.', 1)[-1]}") for q in aliases[func.id]]
        qual = summary.qualify(func)
        return [("name", qual, "", None)] if qual else []
    if isinstance(func, ast.Attribute):
        value = func.value
        if isinstance(value, ast.Name) and value.id == "self":
            if owner is None:
                return []
            # Subclasses that override the method run their own (virtual dispatch, `Index.targets`);
            # an attribute the class sets (`self.proj = nn.Linear(...)`) is a value, not a method.
            found: list[Target] = [] if func.attr in values else [("override", owner, func.attr, None)]
            if found and caller == "forward":
                # A subclass that keeps this `forward` runs it as its own entry, on its own
                # instance: `self.attr` is that subclass's, whichever and however many there are.
                found.append(("inherits", owner, f"forward.{func.attr}", None))
            if func.attr not in methods and _may_resolve(summary, owner, func.attr):
                found.append(("self", owner, func.attr, None))
            return found
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
            and owner is not None
        ):
            return [("super", owner, func.attr, None)]
        if isinstance(value, ast.Name) and value.id in instances:
            return [(form, q, func.attr, label) for form, q, label in instances[value.id]]
        stored = _self_attr(value)
        if stored is not None and owner is not None and func.attr not in ("forward", "__call__"):
            # `self.updater.step()`: a method of the instance the class stores on `self.updater`
            # (`self(...)`-style calls of a stored module are its forward, an entry of its own).
            handed = stored in (values_handed or ())
            # Not set on self: `self.p` may be a property, whose result's method runs.
            read = [] if stored in values else [("instance", f"{owner}.{stored}", func.attr, None)]
            return [("stored", owner, f"{stored}.{func.attr}", None), *read, *_named(func.attr, handed)]
        if isinstance(value, ast.Call):  # GreedySearch(3).decode(x), TABLE[key](...).run(x)
            built = _value_of(value, summary, owner, values, tables, made, instances)
            if built:
                return [(form, q, func.attr, label) for form, q, label in built]
            qual = summary.qualify(value.func)
            return [("instance", qual, func.attr, None)] if qual else []
        qual = summary.qualify(func)
        return [("name", qual, "", None)] if qual else _named(func.attr)
    if isinstance(func, ast.Call):  # C(...)(x) calls the instance; select(...)(x) what a factory returns
        qual = summary.qualify(func.func)
        label = f"{ast.unparse(func.func)}(...)"
        return [("instance", qual, "__call__", None), ("table", qual, "", label)] if qual else []
    return []


def _named(attr: str, handed: bool = False) -> list[Target]:
    """`obj._m(...)` on an object of unknown class: a private method (one leading underscore) is
    the package's own business, so whichever of the tree's classes define `_m` may run
    (torchsde's `self._last_interval._loc(ta, tb)`, `parent._randn(seed)` on its `_Interval`
    tree nodes). So may any method called on an object `__init__` was handed and stored as it
    came (zuko's `self.transform.call_and_ladj(x)`, `self.transform = transform`); a public name
    on any other object (`cache.update`, `self.kernel.to(x)` of a buffer) says nothing about
    the class."""
    private = attr.startswith("_") and not attr.startswith("__")
    public = handed and not attr.startswith("__") and attr not in _TENSOR_OR_MODULE_METHODS
    return [("named", "", attr, f".{attr}(...)")] if private or public else []


def _stored_arguments(cls: ast.ClassDef | None) -> frozenset[str]:
    """Attributes `__init__` sets to one of its parameters as it came (`self.transform = transform`)."""
    init = (
        next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if cls is not None
        else None
    )
    if init is None:
        return frozenset()
    # A parameter annotated as a tensor or a module holds torch's class, not one of the tree's
    # (`attn_mask: torch.Tensor = None`, then `self.attn_mask.to(x)`).
    params = {
        a.arg
        for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)
        if a.annotation is None or not _TORCH_ANNOTATION.search(ast.unparse(a.annotation))
    }
    return frozenset(
        attr
        for node in iter_statements(init)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and (attr := _self_attr(node.targets[0])) is not None
        and isinstance(node.value, ast.Name)
        and node.value.id in params - {"self"}
    )


def _may_resolve(summary: FileSummary, owner: str, attr: str) -> bool:
    """`self.attr(...)` can reach the tree: the class has a base there (which may define `attr`),
    or stores under `attr` an instance of a class that is not torch's (`self.proj = nn.Linear()`
    is a module whose forward is an entry of its own)."""
    cls = summary.classes.get(owner.rsplit(".", 1)[-1])
    if cls is None or any(not outside(b) for b in cls.bases):
        return True
    return any(attr == name and any(not outside(q) for q in built) for name, built in cls.stored)


def _may_read_property(summary: FileSummary, owner: str, attr: str) -> bool:
    """`obj.attr` may run a property getter: the class (of this file) has the property, or has a
    base in the tree, or is another file's class (decided when resolving)."""
    module, _, name = owner.rpartition(".")
    cls = summary.classes.get(name) if module == summary.module else None
    if cls is None:
        return True
    return attr in cls.properties or (attr not in cls.methods and any(not outside(b) for b in cls.bases))


# ---------------------------------------------------------------- resolving calls


class Index:
    """The summaries of every file of the tree, by module name."""

    def __init__(self, summaries: Mapping[str, FileSummary]):
        self.summaries = summaries
        self.paths: dict[str, str] = {}
        for path in sorted(summaries):
            self.paths.setdefault(summaries[path].module, path)
        self._subclasses: dict[tuple[str, str], list[tuple[str, str]]] | None = None
        self._definers: dict[str, list[tuple[str, str, bool]]] | None = None
        self._overrides: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
        self._classes: dict[str, tuple[str, str] | None] = {}
        self._below: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._instances: dict[str, list[tuple[str, str]]] = {}  # `instance_classes` from the top

    def table(self, qualname: str, depth: int = 0) -> tuple[str, ...]:
        """The values of the dispatch table `qualname` names in the tree, following re-exports."""
        parts = qualname.split(".")
        path = self.paths.get(".".join(parts[:-1]))
        if path is None:
            return ()
        summary = self.summaries[path]
        if parts[-1] in summary.tables:
            return summary.tables[parts[-1]]
        if parts[-1] in summary.bindings and depth < _MAX_DEPTH:
            again = summary.bindings[parts[-1]]
            return self.table(again, depth + 1) if again != qualname else ()
        return ()

    def subclasses(self, path: str, name: str) -> list[tuple[str, str]]:
        """The classes of the tree that derive from the class, directly or not, sorted."""
        if self._subclasses is None:
            children: dict[tuple[str, str], set[tuple[str, str]]] = {}
            for cls_path in sorted(self.summaries):
                for cls, summary in self.summaries[cls_path].classes.items():
                    for base in summary.bases:
                        found = self._class(base)
                        if found is not None and found != (cls_path, cls):
                            children.setdefault(found, set()).add((cls_path, cls))
            self._subclasses = {key: sorted(found) for key, found in children.items()}
        if (path, name) not in self._below:  # asked for each call into a base (`inheritors`)
            out: set[tuple[str, str]] = set()
            todo = [(path, name)]
            while todo:
                for child in self._subclasses.get(todo.pop(), ()):
                    if child not in out and child != (path, name):
                        out.add(child)
                        todo.append(child)
            self._below[path, name] = sorted(out)
        return list(self._below[path, name])

    def overrides(self, path: str, name: str, attr: str) -> list[tuple[str, str, bool]]:
        """The definitions of method `attr` in subclasses of the class (`self.attr(...)` in the
        class runs one of them on a subclass's instance). None when more than `_MAX_OVERRIDES`
        classes define it: a hook that a whole model zoo overrides says nothing about which runs."""
        key = (path, f"{name}.{attr}")
        if key not in self._overrides:
            found = sorted(
                (sub_path, f"{sub}.{attr}", False)
                for sub_path, sub in self.subclasses(path, name)
                if attr in self.summaries[sub_path].classes[sub].methods
                and attr not in self.summaries[sub_path].classes[sub].properties
            )
            self._overrides[key] = found if len(found) <= _MAX_OVERRIDES else []
        return self._overrides[key]

    def inheritors(self, path: str, name: str, entry: str, attr: str) -> list[tuple[str, str, bool]]:
        """The definitions of method `attr` in the subclasses whose `entry` method is the class's
        own (`BaseLoss.forward` calls `self.compute_loss`; `TripletLoss(BaseLoss)` defines
        `compute_loss` and no `forward`): each such subclass runs `attr` from its own entry, so
        none is a guess and no `_MAX_OVERRIDES` bound applies."""
        own = (path, f"{name}.{entry}")
        return sorted(
            (sub_path, f"{sub}.{attr}", False)
            for sub_path, sub in self.subclasses(path, name)
            if self.method(sub_path, sub, entry) == own
            and (hit := self.method(sub_path, sub, attr)) is not None
            and hit[0] == sub_path
            and hit[1] == f"{sub}.{attr}"
            and attr not in self.summaries[sub_path].classes[sub].properties
        )

    def definers(self, attr: str) -> list[tuple[str, str, bool]]:
        """The methods named `attr` of every class of the tree; none when more than
        `_MAX_OVERRIDES` classes define it (the name then says nothing about the class)."""
        if self._definers is None:
            self._definers = {}
            for path in sorted(self.summaries):
                for name, cls in sorted(self.summaries[path].classes.items()):
                    # Each list is in path and class order; a class adds one item to each.
                    for method in cls.methods - cls.properties - cls.unbound:
                        self._definers.setdefault(method, []).append((path, f"{name}.{method}", False))
        found = self._definers.get(attr, [])
        return found if len(found) <= _MAX_OVERRIDES else []

    def lookup(self, qualname: str, depth: int = 0) -> tuple[str, str, str | None] | None:
        """(path, top-level name, member or None) that `qualname` names in the tree, following
        re-exports; None when it lies outside the tree or names a module."""
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            path = self.paths.get(".".join(parts[:cut]))
            if path is None:
                continue
            summary = self.summaries[path]
            head, rest = parts[cut], parts[cut + 1 :]
            if head in summary.classes and len(rest) <= 1:
                return path, head, rest[0] if rest else None
            if head in summary.functions and not rest:
                return path, head, None
            if head in summary.bindings and depth < _MAX_DEPTH:
                again = ".".join([summary.bindings[head], *rest])
                if again != qualname:
                    return self.lookup(again, depth + 1)
            return None
        return None

    def classes_of(self, path: str, name: str, depth: int = 0) -> list[tuple[str, str]]:
        """The class and its bases in the tree, in lookup order (depth first, like a simple MRO)."""
        order = [(path, name)]
        if depth >= _MAX_DEPTH:
            return order
        for base in self.summaries[path].classes[name].bases:
            found = self.lookup(base)
            if found is not None and found[2] is None and found[1] in self.summaries[found[0]].classes:
                order.extend(c for c in self.classes_of(found[0], found[1], depth + 1) if c not in order)
        return order

    def method(self, path: str, name: str, attr: str, skip_own: bool = False) -> tuple[str, str] | None:
        for owner_path, owner in self.classes_of(path, name)[1 if skip_own else 0 :]:
            if attr in self.summaries[owner_path].classes[owner].methods:
                return owner_path, f"{owner}.{attr}"
        return None

    def stored_classes(self, path: str, name: str, attr: str, keywords: bool = True) -> list[str]:
        """The qualified names of the classes the class (or a base) may store on `self.attr`:
        built there, handed to a setter, or handed by keyword to a keyword setter of the class's
        own chain (`self.register_modules(scheduler=scheduler)`, the setter in a base's file)."""
        found: set[str] = set()
        chain = self.classes_of(path, name)
        for cls_path, cls in chain:
            summary = self.summaries[cls_path].classes[cls]
            for stored_attr, built in summary.stored:
                if stored_attr == attr:
                    found.update(built)
            for method, stored_attr, built in summary.keyword_stores if keywords else ():
                if stored_attr != attr:
                    continue
                hit = self.method(path, name, method)
                if hit is not None:
                    owner = self.summaries[hit[0]].classes[hit[1].split(".")[0]]
                    if method in owner.keyword_setters:
                        found.update(built)
        return sorted(found)

    def _class(self, qualname: str) -> tuple[str, str] | None:
        # Asked once per base of every class of the tree (`subclasses`), mostly for a few bases.
        if qualname not in self._classes:
            found = self.lookup(qualname)
            if found is None or found[2] is not None or found[1] not in self.summaries[found[0]].classes:
                self._classes[qualname] = None
            else:
                self._classes[qualname] = found[0], found[1]
        return self._classes[qualname]

    def targets(self, call: Call) -> list[tuple[str, str, bool | str]]:
        """(path, "f" or "Class.method", explicit self) for each function the call may run; with
        an explicit self (`Class.method(self, x)`), the call's first argument is the instance;
        with "ctx", the function takes a context before the call's arguments (`Fn.apply(x)`
        runs the `autograd.Function`'s `forward(ctx, x)`)."""
        if call.form == "name":
            found = self.lookup(call.qualname)
            if found is None:
                return []
            path, head, member = found
            if head in self.summaries[path].functions and member is None:
                return [(path, head, False)]
            if member is not None:
                # `Class.method(self, x)` passes self explicitly: the first argument is not `x`'s.
                hit = self.method(path, head, member)
                if hit is None:
                    return self._applied(path, head) if member == "apply" else []
                owner = self.summaries[hit[0]].classes[hit[1].split(".")[0]]
                return [(*hit, member not in owner.unbound)]
            return self._construct(path, head)
        if call.form == "table":
            out = set()
            for value in self.table(call.qualname):
                out.update(self.targets(call._replace(form="name", qualname=value)))
            return sorted(out)
        if call.form == "table_instance":
            out = set()
            for value in self.table(call.qualname):
                out.update(self.targets(call._replace(form="instance", qualname=value)))
            return sorted(out)
        if call.form == "named":
            return self.definers(call.attr)
        if call.form == "override":
            owner = self._class(call.qualname)
            return self.overrides(*owner, call.attr) if owner is not None else []
        if call.form == "inherits":
            owner = self._class(call.qualname)
            entry, _, attr = call.attr.partition(".")
            return self.inheritors(*owner, entry, attr) if owner is not None else []
        if call.form == "decorator":
            found = self.lookup(call.qualname)
            if found is None or found[2] is not None or found[1] not in self.summaries[found[0]].functions:
                return []
            return [(found[0], f"@{found[1]}", False)]  # the wrappers it returns (`scope.wrappers`)
        if call.form in ("self", "super"):
            owner = self._class(call.qualname)
            if owner is None:
                return []
            hit = self.method(*owner, call.attr, skip_own=call.form == "super")
            if hit is not None:
                return [(*hit, False)]
            if call.form == "super":
                return []
            out = []
            # A component registered by keyword is called for its forward (`self.unet(x)`), an
            # entry of its own: only its methods are followed (the "stored" form below).
            for qualname in self.stored_classes(*owner, call.attr, keywords=False):
                stored = self._class(qualname)
                hit = self.method(*stored, "__call__") if stored else None
                if hit is not None:
                    out.append((*hit, False))
            return sorted(set(out))
        if call.form == "stored":
            owner = self._class(call.qualname)
            attr, _, name = call.attr.partition(".")
            out = []
            for qualname in self.stored_classes(*owner, attr) if owner is not None else ():
                stored = self._class(qualname)
                hit = self.method(*stored, name) if stored else None
                if hit is not None:
                    out.append((*hit, False))
            return sorted(set(out))
        if call.form == "property":
            out = set()
            for cls in self.instance_classes(call.qualname):
                hit = self.method(*cls, call.attr)
                if (
                    hit is not None
                    and call.attr in self.summaries[hit[0]].classes[hit[1].split(".")[0]].properties
                ):
                    out.add((*hit, False))
            return sorted(out)
        if call.form == "instance":
            out = set()
            for cls in self.instance_classes(call.qualname):
                hit = self.method(*cls, call.attr)
                if hit is not None:
                    out.add((*hit, False))
            return sorted(out)
        return []

    def instance_classes(self, qualname: str, depth: int = 0) -> list[tuple[str, str]]:
        """The classes of the tree an "instance" of `qualname` may be: the class it names, or the
        classes that the function or method it names returns (`FileSummary.returns`, followed
        through returns of other functions' results). Value flow: `X.m` is what member `m` gives
        on an instance of X (a method's or property's result, the classes stored on `self.m`,
        `X.__call__` a module's `forward`'s), and `X[i]` item i of the tuple X returns."""
        if depth == 0:
            if qualname not in self._instances:
                self._instances[qualname] = self._instance_classes(qualname)
            return self._instances[qualname]
        return self._instance_classes(qualname, depth)

    def _instance_classes(self, qualname: str, depth: int = 0) -> list[tuple[str, str]]:
        cls = self._class(qualname)
        if cls is not None:
            return [cls]
        if depth >= _MAX_DEPTH:
            return []
        base, item = qualname, ""
        if qualname.endswith("]") and "[" in qualname:
            base, _, index = qualname[:-1].rpartition("[")
            item = f"[{index}]"
        found = self.lookup(base)
        if found is not None and found[2] is None:
            names = self.summaries[found[0]].returns.get(found[1] + item, ())
        elif found is not None:
            names = self._member_result(found[0], found[1], found[2], item)
        else:  # `X.m` where X is itself a value: m on each class X may be
            prefix, _, member = base.rpartition(".")
            names = []
            for owner in self.instance_classes(prefix, depth + 1) if prefix else ():
                names.extend(q for q in self._member_result(*owner, member, item) if q not in names)
        out: list[tuple[str, str]] = []
        for name in names:
            out.extend(c for c in self.instance_classes(name, depth + 1) if c not in out)
        return out

    def _member_result(self, path: str, name: str, member: str, item: str = "") -> list[str]:
        """The classes that member `member` of class `name` gives: a method's or property's result
        (item `item` of it), the classes stored on `self.member`; `__call__` without a definition
        in the tree is the module's `forward`."""
        hit = self.method(path, name, member)
        if hit is None and member == "__call__":
            hit = self.method(path, name, "forward")
        if hit is not None:
            method = hit[1].split(".")[1]
            return list(
                dict(self.summaries[hit[0]].classes[hit[1].split(".")[0]].returns).get(method + item, ())
            )
        return [] if item else self.stored_classes(path, name, member)

    def _applied(self, path: str, name: str) -> list[tuple[str, str, bool | str]]:
        """`Fn.apply(x, ...)` of a class whose `forward` is a static method (an `autograd.Function`,
        zuko's `AdaptiveCheckpointAdjoint`): dynamo traces that `forward` with a context first."""
        hit = self.method(path, name, "forward")
        if hit is None or "forward" not in self.summaries[hit[0]].classes[hit[1].split(".")[0]].unbound:
            return []
        return [(*hit, "ctx")]

    def _construct(self, path: str, name: str) -> list[tuple[str, str, bool]]:
        """Building a class runs its `__init__` and, for a dataclass, `__post_init__`."""
        out = []
        for special in ("__init__", "__post_init__"):
            hit = self.method(path, name, special)
            if hit is not None:
                out.append((*hit, False))
        return out


def inherited_modules(index: Index, paths: Iterable[str] | None = None) -> dict[str, tuple[Reached, ...]]:
    """Classes that are nn.Modules only through a base of another file (nflows' `class
    ActNorm(Transform)`, `Transform(nn.Module)` in its own file): per file, a `^Class` root naming
    each, with the base that makes it one, so that its `forward` is an entry like any module's.
    Likewise a framework's metric through a base of another file (pytorch-forecasting's `class
    MASE(MultiHorizonMetric)`): roots for the methods the framework runs (`_framework_roots`).
    `paths`: only these files' (of the index's)."""
    paths = None if paths is None else set(paths)
    roots: dict[str, list[Reached]] = {}
    for path in sorted(index.summaries if paths is None else paths & index.summaries.keys()):
        for name, cls in index.summaries[path].classes.items():
            if not cls.module and MODULE_ENTRIES & set(cls.methods):
                for base_path, base in index.classes_of(path, name)[1:]:
                    if index.summaries[base_path].classes[base].module:
                        roots.setdefault(path, []).append(
                            Reached(f"{MODULE_ROOT}{name}", (f"{base_path}:{base}",))
                        )
                        break
            if not cls.entries:
                _framework_roots(index, path, name, roots)
    return {path: tuple(found) for path, found in roots.items() if paths is None or path in paths}


def _framework_roots(index: Index, path: str, name: str, roots: dict[str, list[Reached]]) -> None:
    """A framework's metric through a base of another file: the definitions its instances run of
    the methods the framework calls (its own, a mixin's: `class SCODAURC(_Mixin, AURC)` runs
    `_Mixin.update`), as roots of their files, unless a framework class's own file enters them."""
    for base_path, base in index.classes_of(path, name)[1:]:
        entries = index.summaries[base_path].classes[base].entries
        if not entries:
            continue
        for method in sorted(entries):
            hit = index.method(path, name, method)
            if hit is None or index.summaries[hit[0]].classes[hit[1].split(".")[0]].entries:
                continue
            found = roots.setdefault(hit[0], [])
            if all(r.name != hit[1] for r in found):
                found.append(Reached(hit[1], (f"{base_path}:{base}",)))
        return


def reach_roots(index: Index, calls: Iterable[tuple[str, Iterable[Call]]]) -> dict[str, tuple[Reached, ...]]:
    """The functions each file must analyse for the calls of other files (and its own calls into
    classes it defines). Per function: a path from an entry (`_via_rank`) and the union of the
    kinds every caller passed."""
    merged: dict[tuple[str, str], tuple[tuple[str, ...], list[set], dict[str, set], set]] = {}
    iterated: dict[tuple[str, str], set[tuple[int | str, str, str]]] = {}
    sized: dict[tuple[str, str], set[tuple[int | str, bool, tuple[str, ...], tuple]]] = {}
    best: dict[tuple[str, str], tuple] = {}
    for _caller, file_calls in sorted(calls, key=lambda item: item[0]):
        for call in file_calls:
            for path, name, explicit_self in index.targets(call):
                key = (path, name)
                via, args, keywords, sides = merged.get(key, (call.via, [], {}, set()))
                sides.add(call.side or "")
                rank = _via_rank(call)
                if key not in merged or rank < best[key]:
                    via, best[key] = call.via, rank
                if name.endswith("__post_init__"):
                    args_here: tuple[str | None, ...] = ()
                elif explicit_self == "ctx":
                    args_here = (None, *call.args)  # the context `apply` hands `forward` first
                else:
                    args_here = call.args[1 if explicit_self else 0 :]
                for position, kind in enumerate(args_here):
                    while len(args) <= position:
                        args.append(set())
                    args[position].add(kind)
                for keyword, kind in call.keywords if not name.endswith("__post_init__") else ():
                    keywords.setdefault(keyword, set()).add(kind)
                merged[key] = (via, args, keywords, sides)
                shift = -1 if explicit_self is True else 1 if explicit_self == "ctx" else 0
                for where, attr in call.elements:
                    where = where + shift if isinstance(where, int) else where
                    if not isinstance(where, int) or where >= 0:
                        iterated.setdefault(key, set()).add((where, attr, call.via[0]))
                for where, fixed, source in call.sized if not name.endswith("__post_init__") else ():
                    where = where + shift if isinstance(where, int) else where
                    if not isinstance(where, int) or where >= 0:
                        sized.setdefault(key, set()).add((where, fixed, (*call.via, name), source))
    roots: dict[str, list[Reached]] = {}
    for (path, name), (via, args, keywords, sides) in sorted(merged.items()):
        roots.setdefault(path, []).append(
            Reached(
                name,
                via,
                tuple(_sorted_kinds(k) for k in args),
                tuple((kw, _sorted_kinds(k)) for kw, k in sorted(keywords.items())),
                # On a side road only when every call is: one call on the normal path makes it normal.
                None if "" in sides else min(sides),
                tuple(sorted(iterated.get((path, name), ()), key=repr)),
                _best_sized(sized.get((path, name), set())),
            )
        )
    return {path: tuple(found) for path, found in roots.items()}


def _best_sized(found: set[tuple[int | str, bool, tuple[str, ...], tuple]]) -> tuple:
    """One entry per position or keyword: sized by a fixed op where some call is, then the
    shortest path, then the first in sort order (the call the finding names)."""
    best: dict[int | str, tuple[int | str, bool, tuple[str, ...], tuple]] = {}
    for entry in sorted(found, key=lambda e: (repr(e[0]), not e[1], len(e[2]), e[2], repr(e[3]))):
        best.setdefault(entry[0], entry)
    return tuple(best[k] for k in sorted(best, key=repr))


def _via_rank(call: Call) -> tuple:
    """Which caller's path a finding names: one that hands over a tensor (the findings a tensor
    argument makes are true for it), then the shortest, then the first in sort order."""
    kinds = (*call.args, *(k for _name, k in call.keywords))
    return (not any(k in ("tensor", "bool") for k in kinds), len(call.via), call.via)


def _sorted_kinds(kinds: set) -> tuple[str | None, ...]:
    return tuple(sorted(kinds, key=lambda k: "" if k is None else k))


def reached_note(chain: tuple[str, ...]) -> str:
    """What a finding's message adds when only an entry of another file reaches its function."""
    return f"reached from {' → '.join(chain)}"
