"""Lower `ast` to canonical terms, block by block, inlining single-assignment temporaries.

A block (a function body, the body of an `if`, ...) is read top to bottom. Every simple
`name = value` creates a `Binding`; a later read of that name becomes an `inl` term that
wraps the binding's value and records the `ast.Name` it was read at. Reads that the
engine cannot inline (inside a nested block, a lambda, a comprehension, an augmented
assignment) mark the binding as escaping: its statement must stay. Names carry a
version (`x#3`) so that two reads of `x` are equal only when they see the same value.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field

from fuselint.source.imports import ImportTable
from fuselint.source.nodes import child_nodes, walk
from fuselint.source.patterns_canon import (
    ALIASES,
    CAST_METHODS,
    DTYPE_ALIASES,
    MATH_CONSTS,
    METHODS,
    NOT_TENSORS,
    Builder,
    Term,
    fold,
    is_number,
    normalize_call,
    strip,
)

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow", ast.MatMult: "mm"}
_COMPARE = {ast.Gt: "torch.gt", ast.GtE: "torch.ge", ast.Lt: "torch.lt", ast.LtE: "torch.le"}
_COMPARE |= {ast.Eq: "torch.eq", ast.NotEq: "torch.ne"}
_COUNTER = itertools.count(1)


@dataclass(eq=False)
class Binding:
    """`name = value` at statement `stmt` of a block."""

    name: str
    version: str
    term: Term
    stmt: int
    uses: list[tuple[ast.Name, int]] = field(default_factory=list)  # (read, statement index)
    escapes: bool = False


@dataclass
class Statement:
    node: ast.stmt
    root: Term | None  # the canonical value of its expression, when it has one
    expr: ast.expr | None
    assigns: dict[str, str] = field(default_factory=dict)  # name -> version after it
    binding: Binding | None = None


@dataclass
class Block:
    statements: list[Statement]
    entry: str  # version suffix of names as they are when the block starts
    bindings: list[Binding] = field(default_factory=list)


class Lowerer:
    """Lowers one file's expressions; `constants` are module-level names bound to numbers."""

    def __init__(self, imports: ImportTable, builder: Builder, constants: dict[str, float] | None = None):
        self.imports = imports
        self.b = builder
        self.constants = constants or {}
        self.env: dict[str, Binding] = {}
        self.versions: dict[str, str] = {}
        self.entry = "in"
        self.stmt = -1
        self.shared: set[str] = set()

    # ------------------------------------------------------------------ blocks

    def block(self, stmts: list[ast.stmt], escapes_at_end: bool) -> Block:
        self.env, self.versions = {}, {}
        self.entry = f"in{next(_COUNTER)}"
        # `global x` / `nonlocal x`: assigning x is visible outside, never a temporary.
        self.shared = {
            name
            for stmt in stmts
            for node in _scope_statements(stmt)
            if isinstance(node, (ast.Global, ast.Nonlocal))
            for name in node.names
        }
        block = Block([], self.entry)
        for index, stmt in enumerate(stmts):
            self.stmt = index
            block.statements.append(self._statement(stmt, block))
        ends = stmts and isinstance(stmts[-1], (ast.Return, ast.Raise))
        if escapes_at_end and not ends:
            for binding in self.env.values():
                binding.escapes = True
        return block

    def _statement(self, stmt: ast.stmt, block: Block) -> Statement:
        single = (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        )
        if single and stmt.targets[0].id not in self.shared:
            term = self.lower(stmt.value)
            name = stmt.targets[0].id
            version = f"{name}#{next(_COUNTER)}"
            binding = Binding(name, version, term, self.stmt)
            self.env[name] = binding
            self.versions[name] = version
            block.bindings.append(binding)
            return Statement(stmt, term, stmt.value, {name: version}, binding)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr)):
            value = stmt.value
            if isinstance(stmt, ast.AugAssign):
                self._escape(stmt.target)
            else:
                for target in getattr(stmt, "targets", [getattr(stmt, "target", None)]):
                    if target is not None and not isinstance(target, ast.Name):
                        self._escape(target)  # `x[i] = ...`, `a, b = ...` read names too
            term = self.lower(value) if value is not None else None
            return Statement(stmt, term, value, self._rebind(stmt))
        # Compound statements and everything else: reads escape, writes are unknown values.
        self._escape(stmt)
        return Statement(stmt, None, None, self._rebind(stmt))

    def _rebind(self, stmt: ast.stmt) -> dict[str, str]:
        """Names the statement assigns in this scope (not inside nested functions or classes)."""
        assigned: dict[str, str] = {}
        if isinstance(stmt, _SCOPES):
            assigned[stmt.name] = f"{stmt.name}#{next(_COUNTER)}"
        else:
            for node in _walk_scope(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    assigned[node.id] = f"{node.id}#{next(_COUNTER)}"
                elif isinstance(node, _SCOPES):
                    assigned[node.name] = f"{node.name}#{next(_COUNTER)}"
        for name, version in assigned.items():
            self.env.pop(name, None)
            self.versions[name] = version
        return assigned

    def _escape(self, node: ast.AST) -> None:
        if not self.env:  # nothing inlinable is live: nothing can escape
            return
        for sub in walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in self.env:
                binding = self.env[sub.id]
                binding.escapes = True
                binding.uses.append((sub, self.stmt))

    # ------------------------------------------------------------------ expressions

    def lower(self, node: ast.expr) -> Term:
        method = getattr(self, "_" + type(node).__name__, None)
        term = method(node) if method else None
        if term is None:
            return self._opaque(node)
        return term

    def _opaque(self, node: ast.AST) -> Term:
        """Something the engine does not model: equal only to itself."""
        self._escape(node)
        return self.b.make("opaque", value=f"@{next(_COUNTER)}", node=node, stmt=self.stmt)

    def _Constant(self, node: ast.Constant) -> Term:
        return self.b.const(node.value, node, self.stmt)

    def _Name(self, node: ast.Name) -> Term:
        binding = self.env.get(node.id)
        if binding is not None:
            binding.uses.append((node, self.stmt))
            if binding.term.op == "c":  # a named constant is its value
                return self.b.const(binding.term.value, node, self.stmt)
            return self.b.make("inl", (binding.term,), node=node, stmt=self.stmt, use=binding)
        if node.id in self.versions:
            return self.b.make("n", value=self.versions[node.id], node=node, stmt=self.stmt)
        qual = self.imports.qualname(node)
        if qual is not None:
            return self._qualified(qual, node)
        if node.id in self.constants:
            return self.b.const(self.constants[node.id], node, self.stmt)
        return self.b.make("n", value=f"{node.id}#{self.entry}", node=node, stmt=self.stmt)

    def _qualified(self, qual: str, node: ast.AST) -> Term:
        if qual in MATH_CONSTS:
            return self.b.const(MATH_CONSTS[qual], node, self.stmt)
        return self.b.make("q", value=DTYPE_ALIASES.get(qual, qual), node=node, stmt=self.stmt)

    def _Attribute(self, node: ast.Attribute) -> Term:
        qual = self.imports.qualname(node)
        if qual is not None and not self._shadowed(node):
            return self._qualified(qual, node)
        base = self.lower(node.value)
        if node.attr == "values" and _reduction_max(strip(base)):
            return self.b.call("torch.amax", list(strip(base).args), node, self.stmt)
        if node.attr == "mT":
            return self.b.call("torch.transpose", [base, self.b.const(-2), self.b.const(-1)], node, self.stmt)
        return self.b.make("a", (base,), node.attr, node=node, stmt=self.stmt)

    def _shadowed(self, node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and (node.id in self.env or node.id in self.versions)

    def _Subscript(self, node: ast.Subscript) -> Term:
        base = self.lower(node.value)
        index = self.lower(node.slice)
        inner = strip(base)
        if _reduction_max(inner) and is_number(index) and index.value == 0:
            return self.b.call("torch.amax", list(inner.args), node, self.stmt)
        return self.b.make("i", (base, index), node=node, stmt=self.stmt)

    def _Slice(self, node: ast.Slice) -> Term:
        parts = [
            self.lower(p) if p is not None else self.b.const(None)
            for p in (node.lower, node.upper, node.step)
        ]
        return self.b.make("sl", tuple(parts), node=node, stmt=self.stmt)

    def _Tuple(self, node: ast.Tuple | ast.List) -> Term | None:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        return self.b.make("t", tuple(self.lower(e) for e in node.elts), node=node, stmt=self.stmt)

    _List = _Tuple

    def _UnaryOp(self, node: ast.UnaryOp) -> Term | None:
        operand = self.lower(node.operand)
        if isinstance(node.op, ast.USub):
            return self.b.neg(operand, node, self.stmt)
        if isinstance(node.op, ast.UAdd):
            return self.b._renode(operand, node, self.stmt)
        return None

    def _BinOp(self, node: ast.BinOp) -> Term | None:
        kind = _BINOPS.get(type(node.op))
        if kind is None:
            return None
        a, c = self.lower(node.left), self.lower(node.right)
        if kind == "add":
            return self.b.add([a, c], node, self.stmt)
        if kind == "sub":
            return self.b.add([a, self.b.neg(c)], node, self.stmt)
        if kind == "mul":
            return self.b.mul([a, c], node, self.stmt)
        if kind == "div":
            return self.b.div(a, c, node, self.stmt)
        if kind == "pow":
            return self.b.pow(a, c, node, self.stmt)
        return self.b.make("mm", (a, c), node=node, stmt=self.stmt)

    def _Compare(self, node: ast.Compare) -> Term | None:
        """`a > b` is `torch.gt(a, b)`; a chain (`a < b < c`) stays opaque."""
        name = _COMPARE.get(type(node.ops[0])) if len(node.ops) == 1 else None
        if name is None:
            return None
        return self.b.call(name, [self.lower(node.left), self.lower(node.comparators[0])], node, self.stmt)

    def _Call(self, node: ast.Call) -> Term | None:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return None
        func = node.func
        qual = self.imports.qualname(func) if not self._shadowed(func) else None
        pos = [self.lower(a) for a in node.args]
        kw = {k.arg: self.lower(k.value) for k in node.keywords}
        if qual is not None:
            if qual in ALIASES:
                term = normalize_call(self.b, qual, pos, kw, node, self.stmt)
                if term is not None:
                    return term
            folded = fold(qual, pos) if not kw else None
            if folded is not None:
                return self.b.const(folded, node, self.stmt)
            if qual in ("math.sqrt", "numpy.sqrt") and len(pos) == 1 and not kw:  # of a non-constant
                return self.b.pow(pos[0], self.b.const(0.5), node, self.stmt)
            return self._generic(self._qualified(qual, func), pos, kw, node)
        if isinstance(func, ast.Name) and func.id in ("float", "int") and not kw:
            folded = fold(func.id, pos) if func.id == "float" else None
            if folded is not None:
                return self.b.const(folded, node, self.stmt)
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if not (isinstance(receiver, ast.Name) and receiver.id in NOT_TENSORS):
                term = self._method(func.attr, self.lower(receiver), pos, kw, node)
                if term is not None:
                    return term
        return self._generic(self.lower(func), pos, kw, node)

    def _method(self, name: str, receiver: Term, pos: list[Term], kw: dict[str, Term], node) -> Term | None:
        if name in CAST_METHODS and not pos and not kw:
            dtype = self.b.make("q", value=CAST_METHODS[name])
            return self.b.call("Tensor.to", [receiver, dtype], node, self.stmt)
        if name == "size":
            shape = self.b.make("a", (receiver,), "shape")
            if not pos and not kw:
                return self.b._renode(shape, node, self.stmt)
            if len(pos) == 1 and not kw:
                return self.b.make("i", (shape, pos[0]), node=node, stmt=self.stmt)
        if name in METHODS:
            return normalize_call(self.b, METHODS[name], [receiver, *pos], kw, node, self.stmt)
        return None

    def _generic(self, func: Term, pos: list[Term], kw: dict[str, Term], node) -> Term:
        names = tuple(sorted(kw))
        return self.b.make("call", (func, *pos, *(kw[k] for k in names)), names, node=node, stmt=self.stmt)


def _reduction_max(t: Term) -> bool:
    """`torch.max(x, dim)` (a (values, indices) pair), not `torch.max(x, y)` of two tensors."""
    return t.op == "f:torch.max" and (
        len(t.args) == 3 or (is_number(t.args[1]) and isinstance(t.args[1].value, int))
    )


def _walk_scope(node: ast.AST):
    """ast.walk that does not enter nested functions, classes or lambdas (their own scopes)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        for child in child_nodes(current):
            if not isinstance(child, (*_SCOPES, ast.Lambda)):
                todo.append(child)
            elif isinstance(child, _SCOPES):
                yield child


def _scope_statements(node: ast.stmt):
    """`node` and the statements nested in it, not those of nested functions or classes: where
    a `global` or `nonlocal` of its scope can stand (`_walk_scope` would visit every expression)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        nested = [
            *getattr(current, "body", ()),
            *getattr(current, "orelse", ()),
            *getattr(current, "finalbody", ()),
        ]
        for holder in (*getattr(current, "handlers", ()), *getattr(current, "cases", ())):
            nested.extend(holder.body)
        todo.extend(child for child in nested if not isinstance(child, _SCOPES))


def module_constants(tree: ast.Module, imports: ImportTable, builder: Builder) -> dict[str, float]:
    """Module-level names assigned exactly once to a constant number (`SQRT_2 = math.sqrt(2)`)."""
    counts: dict[str, int] = {}
    candidates: dict[str, ast.expr] = {}
    for stmt in tree.body:
        for node in _walk_scope(stmt) if not isinstance(stmt, _SCOPES) else ():
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            candidates[stmt.targets[0].id] = stmt.value
    lowerer = Lowerer(imports, builder)
    found: dict[str, float] = {}
    for name, value in candidates.items():
        if counts.get(name) == 1 and isinstance(
            value, (ast.Constant, ast.BinOp, ast.Call, ast.UnaryOp, ast.Attribute)
        ):
            term = lowerer.lower(value)
            if is_number(term):
                found[name] = term.value
                lowerer.constants[name] = term.value
    return found
