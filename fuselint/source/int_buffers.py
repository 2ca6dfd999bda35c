"""Int twins of 0-d int buffers that a module reads as Python numbers (FL102's fix, issue 10).

transformers' EnCodec (and the codecs copied from it) registers `stride`, `kernel_size` and
`padding_total` as 0-d int64 buffers built from Python ints, then computes paddings from them in
`forward`. To dynamo those are tensors: the paddings are tensors, and `if length <= max_pad:` reads
one on the host (gb0170). The fix keeps every buffer (state dicts and `.to()` see no change), adds
an int twin beside it in `__init__` (`self.padding_total_int = kernel_size_int - stride_int`), reads
the twin where the class computes numbers, and writes `torch.ceil(x).to(torch.int64)` of such
numbers as `math.ceil(x)`.

What must hold, checked here on the file's `ast` (a method that cannot take numbers keeps reading
the buffers, and so does every method that would hand it, or take from it, such a number):
- the buffer is `nn.Buffer(V, persistent=False)` or `self.register_buffer("N", V, persistent=False)`
  at the top level of `__init__`, V an int64 0-d tensor made from ints: `torch.tensor(E,
  dtype=torch.int64)` (or without dtype where E is visibly an int: int literals and `int`-annotated
  parameters), or `+ - * // %` of such tensors held in locals bound once; a persistent buffer is left,
  since a checkpoint may load another value into it. An attribute `__init__` then computes from such
  buffers with int arithmetic (`self.padding_right = self.padding_total // 2`) is twinned too;
- nothing in the file writes the attribute again unless it writes the same value: `init.copy_(m.N,
  W)`, `init.constant_(m.N, W)`, `m.N.copy_(W)` or `m.N.fill_(W)`, where W, with the writer's locals
  substituted, is V's expression with `m` for `self` (transformers' `_init_weights`);
- in every method that reads a twin, each value computed from it is only combined with Python ints
  (`+ - * // %`, comparisons, `max`, `min`, `int`, `abs`), unpacked, handed to `nn.functional.pad` as
  the padding, used as a slice bound, tested, passed to another method of the class that takes it
  the same way, or returned from a private method that only the class calls through `self`; a
  quotient `a / b` of such ints, plus or minus ints, must end in `torch.ceil(...)`/`torch.floor(...)`
  `.to(torch.int64)`, which becomes `math.ceil(...)`: the form whose float32 error is bounded.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from fuselint.findings import Applicability, Edit, Fix
from fuselint.source.checks._shared import atom, spliced
from fuselint.source.imports import iter_statements
from fuselint.source.module import SourceFile, newline_of
from fuselint.source.nodes import child_nodes, made_once, self_attribute, walk

MESSAGE = (
    "read int twins of the 0-d int64 tensors {names} (buffers registered from ints, and attributes "
    "computed from them), kept beside each in `__init__` "
    "(assumes each buffer's source is a Python int and that no code outside this file writes the buffer; "
    "helpers that returned a 0-d tensor now return an int{rounding})"
)
ROUNDING = (
    "; `math.ceil(a / s + 1)` in float64 equals `torch.ceil` of the float32 one while a + s stays at "
    "most {bound:,} (EnCodec: the length in samples); float32 rounds some larger ones wrongly"
)
# float32 `ceil(a / s + 1)` is exact while a + s <= 2**23 (proof and scan: bench/ceil_float32.py)
CEIL_BOUND = 2**23

_INT_DTYPES = frozenset({"torch.int64", "torch.long"})
_BUFFER = frozenset({"torch.nn.Buffer", "torch.nn.parameter.Buffer"})
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_ROUNDING = {"torch.ceil": "ceil", "torch.floor": "floor"}
_WRITERS = frozenset({"copy_", "constant_", "fill_"})

# What a value computed from a twin is, in the methods that read it.
HOST, INT, FLOAT = 1, 2, 3  # a Python int not from a twin; an int from one; a float from one


@dataclass(frozen=True)
class IntBuffer:
    name: str
    stmt: ast.stmt
    value: ast.expr  # the int64 tensor expression registered
    canonical: str  # its value as ints, locals substituted, for comparing with other writes


@dataclass
class _Init:
    """`__init__`'s straight-line locals: what each is (as ints), and the int64 tensors made there."""

    sf: SourceFile
    values: dict[str, ast.expr] = field(default_factory=dict)  # canonical int expression of a local
    tensors: dict[str, ast.stmt] = field(default_factory=dict)  # int64 tensor locals -> their statement
    rebound: set[str] = field(default_factory=set)
    ints: set[str] = field(default_factory=set)  # parameters annotated `int`
    twinned: set[str] = field(default_factory=set)  # attributes of `self` given a twin so far


def _is_int_tensor(sf: SourceFile, node: ast.expr, ints: set[str]) -> ast.expr | None:
    """E of `torch.tensor(E, dtype=torch.int64)` (or of `torch.tensor(E)` with E visibly an int)."""
    if not (isinstance(node, ast.Call) and sf.imports.qualname(node.func) == "torch.tensor"):
        return None
    if len(node.args) != 1 or any(k.arg not in ("dtype", "device") for k in node.keywords):
        return None
    dtype = next((k.value for k in node.keywords if k.arg == "dtype"), None)
    if dtype is not None:
        return node.args[0] if sf.imports.qualname(dtype) in _INT_DTYPES else None
    return node.args[0] if _visibly_int(node.args[0], ints) else None


def _visibly_int(node: ast.expr, ints: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return node.id in ints
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH):
        return _visibly_int(node.left, ints) and _visibly_int(node.right, ints)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _visibly_int(node.operand, ints)
    return False


def _pure(node: ast.expr) -> bool:
    """Names, attribute chains, constant subscripts, literals and arithmetic: nothing to call."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return _pure(node.value)
    if isinstance(node, ast.Subscript):
        return _pure(node.value) and isinstance(node.slice, ast.Constant)
    if isinstance(node, ast.BinOp):
        return _pure(node.left) and _pure(node.right)
    if isinstance(node, ast.UnaryOp):
        return _pure(node.operand)
    return False


class _Canonical(ast.NodeTransformer):
    """An expression's value with locals substituted, `torch.tensor(E, ...)` as E, and the writer's
    receiver spelled `self`; None (raised as ValueError) where it calls anything else."""

    def __init__(self, sf: SourceFile, values: dict[str, ast.expr], receiver: str):
        self.sf, self.values, self.receiver = sf, values, receiver

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        if node.id == self.receiver:
            return ast.Name("self", ast.Load())
        return ast.Name(node.id, ast.Load())

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if self.sf.imports.qualname(node.func) == "torch.tensor" and len(node.args) == 1:
            return self.visit(node.args[0])
        raise ValueError("a call")

    def generic_visit(self, node: ast.AST) -> ast.AST:
        allowed = (ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Load)
        if not isinstance(node, allowed + (ast.operator, ast.unaryop)):
            raise ValueError(type(node).__name__)
        return super().generic_visit(node)


def _canonical(sf: SourceFile, node: ast.expr, values: dict[str, ast.expr], receiver: str) -> ast.expr | None:
    try:
        return _Canonical(sf, values, receiver).visit(copy.deepcopy(node))
    except ValueError:
        return None


def _bound_names(stmt: ast.stmt) -> set[str]:
    return {n.id for n in walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _step(init: _Init, stmt: ast.stmt, receiver: str) -> None:
    """Follow one statement of a straight-line body: a local bound to a pure value is remembered."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        name = stmt.targets[0].id
        value = _canonical(init.sf, stmt.value, init.values, receiver)
        if _is_int_tensor(init.sf, stmt.value, init.ints) is not None and _pure(
            _is_int_tensor(init.sf, stmt.value, init.ints)
        ):
            if name in init.tensors:
                init.rebound.add(name)  # two int tensors under one name: one `NAME_int` cannot hold both
            init.tensors[name] = stmt
        elif name in init.tensors:
            init.rebound.add(name)
        if value is None:
            init.values.pop(name, None)
        else:
            init.values[name] = value
        return
    for name in _bound_names(stmt):
        init.values.pop(name, None)
        if name in init.tensors:
            init.rebound.add(name)


def _int_form(
    sf: SourceFile, init: _Init, node: ast.expr, used: set[str], nested: bool = False
) -> str | None:
    """The Python-int spelling of an int64 tensor expression of `__init__` (tensor locals as `X_int`)."""
    source = _is_int_tensor(sf, node, init.ints)
    if source is not None:
        if not _pure(source):
            return None
        return atom(sf, source) if nested else sf.segment(source)
    if isinstance(node, ast.Name) and node.id in init.tensors and node.id not in init.rebound:
        used.add(node.id)
        return f"{node.id}_int"
    if self_attribute(node) in init.twinned:
        used.add(f"self.{node.attr}")
        return f"self.{node.attr}_int"
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH):
        sides = []
        for side in (node.left, node.right):
            text = _int_form(sf, init, side, used, nested=True)
            if text is None and isinstance(side, ast.Constant) and type(side.value) is int:
                text = sf.segment(side)
            if text is None:
                return None
            sides.append(text)
        text = f"{sides[0]} {_OP_TEXT[type(node.op)]} {sides[1]}"
        return f"({text})" if nested else text
    return None


_OP_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


def _registered(sf: SourceFile, stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """(name, value) of a non-persistent buffer registered by `stmt` on `self`."""

    def non_persistent(call: ast.Call) -> bool:
        flag = next((k.value for k in call.keywords if k.arg == "persistent"), None)
        return isinstance(flag, ast.Constant) and flag.value is False

    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, call = stmt.targets[0], stmt.value
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and isinstance(call, ast.Call)
            and sf.imports.qualname(call.func) in _BUFFER
            and len(call.args) == 1
            and non_persistent(call)
        ):
            return target.attr, call.args[0]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "register_buffer"
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and len(call.args) == 2
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
            and non_persistent(call)
        ):
            return call.args[0].value, call.args[1]
    return None


def _derived(stmt: ast.stmt, twinned: set[str]) -> tuple[str, ast.expr] | None:
    """(A, V) of `self.A = V` in `__init__`, V arithmetic on twinned attributes and int literals
    (`self.padding_right = self.padding_total // 2`): a plain attribute holding a 0-d int64 tensor."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.BinOp)):
        return None
    name = self_attribute(stmt.targets[0])
    leaves = [n for n in walk(stmt.value) if not isinstance(n, (ast.BinOp, ast.operator, ast.Load))]
    attrs = [self_attribute(n) for n in leaves if isinstance(n, ast.Attribute)]
    if name is None or not attrs or any(a not in twinned for a in attrs):
        return None
    constants = [n for n in leaves if not isinstance(n, ast.Attribute) and not isinstance(n, ast.Name)]
    if len(attrs) + len(constants) != len([n for n in leaves if not isinstance(n, ast.Name)]):
        return None
    if any(not (isinstance(c, ast.Constant) and type(c.value) is int) for c in constants):
        return None
    return name, stmt.value


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def int_buffers(sf: SourceFile, cls: ast.ClassDef) -> tuple[list[IntBuffer], _Init, dict[str, set[str]]]:
    """The class's buffers that can carry int twins, `__init__`'s locals, and the tensor locals
    each buffer's twin reads (as `X_int`)."""
    init_fn = _method(cls, "__init__")
    if init_fn is None:
        return [], _Init(sf), {}
    args = init_fn.args
    ints = {
        a.arg
        for a in args.posonlyargs + args.args + args.kwonlyargs
        if isinstance(a.annotation, ast.Name) and a.annotation.id == "int"
    }
    init = _Init(sf, ints=ints)
    found: list[IntBuffer] = []
    reads: dict[str, set[str]] = {}
    for stmt in init_fn.body:
        registered = _registered(sf, stmt) or _derived(stmt, init.twinned)
        if registered is not None:
            name, value = registered
            used: set[str] = set()
            form = _int_form(sf, init, value, used)
            canonical = _canonical(sf, value, init.values, "self")
            if form is not None and canonical is not None:
                found.append(IntBuffer(name, stmt, value, ast.dump(canonical)))
                reads[name] = used
                init.twinned.add(name)
            continue
        _step(init, stmt, "self")
    # a buffer registered twice, or a local tensor bound again after its use, is not one value
    names = [b.name for b in found]
    found = [b for b in found if names.count(b.name) == 1 and not (reads[b.name] & init.rebound)]
    return found, init, reads


# ---------------------------------------------------------------- other writes of the buffers


def _env_before(sf: SourceFile, body: list[ast.stmt], target: ast.stmt, receiver: str) -> dict | None:
    """Locals (canonical values) of a function just before `target`, following the branches that
    lead to it; None when `target` is not in `body`."""
    init = _Init(sf)
    return _walk_to(init, body, target, receiver)


def _walk_to(init: _Init, body: list[ast.stmt], target: ast.stmt, receiver: str) -> dict | None:
    for stmt in body:
        if stmt is target:
            return init.values
        if any(n is target for n in walk(stmt)):
            for block in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, block, None)
                if isinstance(inner, list) and any(n is target for s in inner for n in walk(s)):
                    return _walk_to(init, inner, target, receiver)
            return None
        _step(init, stmt, receiver)
    return None


def _owners(tree: ast.Module) -> dict[int, tuple[ast.ClassDef | None, ast.FunctionDef | None, ast.stmt]]:
    """For every node: its class, its function and its statement (innermost). Made once per
    file's analysis: each FL102 test asks for it again."""
    return made_once("owners", tree, _owners_of)


def _owners_of(tree: ast.Module) -> dict[int, tuple[ast.ClassDef | None, ast.FunctionDef | None, ast.stmt]]:
    owners: dict[int, tuple] = {}
    # depth first, in the children's order: a shared node (`ast.Load()`) keeps its last owner
    stack = [(child, (None, None, None)) for child in reversed(child_nodes(tree))]
    while stack:
        node, (c, f, s) = stack.pop()
        if isinstance(node, ast.ClassDef):
            c, f = node, None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            f = node
        if isinstance(node, ast.stmt):
            s = node
        owners[id(node)] = owner = (c, f, s)
        stack.extend((child, owner) for child in reversed(child_nodes(node)))
    return owners


def _same_class(cls: ast.ClassDef | None, target: ast.ClassDef) -> bool:
    """`self` inside `cls` may be a `target` object: the class itself or a subclass named here."""
    if cls is None:
        return False
    return cls is target or any(isinstance(b, ast.Name) and b.id == target.name for b in cls.bases)


def _writes_same_value(sf: SourceFile, cls: ast.ClassDef, buffer: IntBuffer, owners: dict) -> bool:
    """Every write of attribute `buffer.name` in the file that may reach this class's objects stores
    the value `__init__` registered."""
    name = buffer.name

    def may_be_ours(attr: ast.Attribute) -> bool:
        owner = owners.get(id(attr), (None, None, None))[0]
        receiver = attr.value
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            return _same_class(owner, cls)
        return True

    for node in walk(sf.tree):
        if node is buffer.stmt:
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            # `x.N = ...`, `x.N += ...`, `x.N[i] = ...`
            base = target.value if isinstance(target, ast.Subscript) else target
            if any(
                isinstance(part, ast.Attribute)
                and part.attr == name
                and (isinstance(part.ctx, ast.Store) or target is not base)
                and may_be_ours(part)
                for part in walk(base)
            ):
                return False
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        written: ast.Attribute | None = None
        value: ast.expr | None = None
        method = (
            func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        )
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == name
        ):
            if method.endswith("_"):
                written = func.value
                value = node.args[0] if method in _WRITERS and len(node.args) == 1 else None
        elif node.args and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == name:
            if method.endswith("_"):
                written = node.args[0]
                value = node.args[1] if method in _WRITERS and len(node.args) == 2 else None
        elif method in ("setattr", "register_buffer") and any(
            isinstance(a, ast.Constant) and a.value == name for a in node.args
        ):
            if method == "register_buffer" and owners.get(id(node))[2] is buffer.stmt:
                continue
            return False
        if written is None or not may_be_ours(written):
            continue
        if value is None or not isinstance(written.value, ast.Name):
            return False
        _, fn, stmt = owners[id(node)]
        values = _env_before(sf, fn.body, stmt, written.value.id) if fn is not None else {}
        if values is None:
            return False
        canonical = _canonical(sf, value, values, written.value.id)
        if canonical is None or ast.dump(canonical) != buffer.canonical:
            return False
    return True


# ---------------------------------------------------------------- the methods that read them


@dataclass
class _Reading:
    """One method's reads of the twins: the edits, and what it hands on."""

    reads: list[ast.Attribute] = field(default_factory=list)
    rounding: list[tuple[ast.Call, ast.expr, str]] = field(default_factory=list)
    calls: dict[str, dict[str, int]] = field(default_factory=dict)  # method -> parameter -> kind
    returns: int | None = None
    tests: set[int] = field(default_factory=set)  # ids of tests that compare twin-made numbers
    bad: bool = False


def _worst(*kinds: int | None) -> int | None:
    present = [k for k in kinds if k is not None]
    return max(present) if present else None


class _MethodReader:
    """Walks one method in order, giving each expression its kind (HOST, INT, FLOAT or None for
    anything else), and marks the method bad where a twin-made number meets a use that needs a tensor."""

    def __init__(self, sf: SourceFile, cls: ast.ClassDef, fn: ast.FunctionDef, twins: set[str], plan: dict):
        self.sf, self.cls, self.fn, self.twins = sf, cls, fn, twins
        self.active: set[str] = plan["active"]
        self.params: dict[str, int] = plan["params"].get(fn.name, {})
        self.returned: dict[str, int | None] = plan["returns"]
        self.out = _Reading()

    def run(self) -> _Reading:
        env: dict[str, int | None] = dict(self.params)
        self._block(self.fn.body, env)
        return self.out

    # statements

    def _block(self, body: list[ast.stmt], env: dict) -> None:
        for stmt in body:
            self._stmt(stmt, env)

    def _join(self, env: dict, *branches: dict) -> None:
        for name in set().union(*branches):
            env[name] = _worst(*(b.get(name) for b in branches))

    def _stmt(self, stmt: ast.stmt, env: dict) -> None:
        if isinstance(stmt, ast.Assign):
            kind = self._expr(stmt.value, env)
            for target in stmt.targets:
                self._bind(target, kind, env)
        elif isinstance(stmt, ast.AugAssign):
            kind = (
                self._binop(stmt.target, stmt.op, stmt.value, env)
                if isinstance(stmt.target, ast.Name)
                else None
            )
            if isinstance(stmt.target, ast.Name):
                env[stmt.target.id] = kind
            elif self._expr(stmt.value, env) in (INT, FLOAT):
                self.out.bad = True
        elif isinstance(stmt, ast.Return):
            kind = self._expr(stmt.value, env) if stmt.value is not None else None
            if kind == FLOAT:
                self.out.bad = True  # a float64 where a float32 tensor was returned
            elif kind == INT:
                self.out.returns = _worst(self.out.returns, kind)
        elif isinstance(stmt, (ast.If, ast.While)):
            if self._expr(stmt.test, env) in (INT, FLOAT):
                self.out.tests.add(id(stmt.test))
            body, orelse = dict(env), dict(env)
            for _ in range(2 if isinstance(stmt, ast.While) else 1):
                self._block(stmt.body, body)
            self._block(stmt.orelse, orelse)
            self._join(env, body, orelse)
        elif isinstance(stmt, ast.For):
            if self._expr(stmt.iter, env) in (INT, FLOAT):
                self.out.bad = True
            self._bind(stmt.target, None, env)
            inner = dict(env)
            for _ in range(2):
                self._block(stmt.body, inner)
            self._block(stmt.orelse, inner)
            self._join(env, env, inner)
        elif isinstance(stmt, ast.Assert):
            if self._expr(stmt.test, env) in (INT, FLOAT):
                self.out.tests.add(id(stmt.test))
            if stmt.msg is not None and self._expr(stmt.msg, env) in (INT, FLOAT):
                self.out.bad = True
        elif isinstance(stmt, ast.Expr):
            self._expr(stmt.value, env)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if any(self._twin_read(n) for n in walk(stmt)):
                self.out.bad = True
        else:
            # with, try, raise, ...: their expressions must not meet twin-made numbers
            for child in ast.iter_child_nodes(stmt):
                expr = child.context_expr if isinstance(child, ast.withitem) else child
                if isinstance(expr, ast.expr) and self._expr(expr, env) in (INT, FLOAT):
                    self.out.bad = True
            for name in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(stmt, name, None) or []:
                    if isinstance(child, ast.stmt):
                        self._stmt(child, env)
                    else:
                        self._block(getattr(child, "body", []), env)

    def _bind(self, target: ast.expr, kind: int | None, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element.value if isinstance(element, ast.Starred) else element, kind, env)
        elif kind in (INT, FLOAT):
            self.out.bad = True  # stored on an object, in a list, ...: seen where we cannot look
        else:
            self._expr(target, env)

    # expressions

    def _twin_read(self, node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr in self.twins
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Load)
        )

    def _binop(self, left: ast.expr, op: ast.operator, right: ast.expr, env: dict) -> int | None:
        """Ints stay ints under `+ - * // %`; `a / b` of ints is a float, which may only gain or lose
        an int (`a / b + 1`) on its way to a rounding: the form whose float32 error is bounded."""
        kinds = (self._expr(left, env), self._expr(right, env))
        if not any(k in (INT, FLOAT) for k in kinds):
            return HOST if kinds == (HOST, HOST) and isinstance(op, _ARITH) else None
        if not all(k in (HOST, INT, FLOAT) for k in kinds):
            self.out.bad = True  # a tensor, or a number of unknown kind, meets ours
            return None
        if isinstance(op, ast.Div) and FLOAT not in kinds:
            return FLOAT
        if FLOAT in kinds and isinstance(op, (ast.Add, ast.Sub)) and kinds.count(FLOAT) == 1:
            return FLOAT
        if FLOAT in kinds or not isinstance(op, _ARITH):
            self.out.bad = True
            return None
        return INT

    def _expr(self, node: ast.expr | None, env: dict) -> int | None:  # noqa: C901 - one case per node kind
        if node is None:
            return None
        if self._twin_read(node):
            self.out.reads.append(node)
            return INT
        if isinstance(node, ast.Constant):
            return HOST if type(node.value) is int else None  # a float literal would make float64 of ours
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.BinOp):
            return self._binop(node.left, node.op, node.right, env)
        if isinstance(node, ast.UnaryOp):
            kind = self._expr(node.operand, env)
            if isinstance(node.op, ast.Not):
                return INT if kind in (INT, FLOAT) else None
            return kind if kind in (HOST, INT, FLOAT) else None
        if isinstance(node, ast.Compare):
            kinds = [self._expr(node.left, env)] + [self._expr(c, env) for c in node.comparators]
            if not any(k in (INT, FLOAT) for k in kinds):
                return None
            if FLOAT in kinds or not all(k in (HOST, INT, FLOAT) for k in kinds):
                self.out.bad = True  # a float32 tensor compared where a float64 would be, or a tensor
                return None
            return INT
        if isinstance(node, ast.BoolOp):
            kinds = [self._expr(v, env) for v in node.values]
            return _worst(*kinds) if any(k in (INT, FLOAT) for k in kinds) else None
        if isinstance(node, ast.IfExp):
            if self._expr(node.test, env) in (INT, FLOAT):
                self.out.tests.add(id(node.test))
            return _worst(self._expr(node.body, env), self._expr(node.orelse, env))
        if isinstance(node, (ast.Tuple, ast.List)):
            kinds = [self._expr(e, env) for e in node.elts]
            return _worst(*kinds) if any(k in (INT, FLOAT) for k in kinds) else None
        if isinstance(node, ast.Subscript):
            return self._subscript(node, env)
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, ast.Attribute):
            if self._expr(node.value, env) in (INT, FLOAT):
                self.out.bad = True  # `.item()`, `.to(...)`, `.dtype`: the value is used as a tensor
            return None
        # anything else (f-strings, comprehensions, lambdas, starred, ...) must not hold our numbers
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr) and self._expr(child, env) in (INT, FLOAT):
                self.out.bad = True
            elif not isinstance(child, ast.expr) and any(self._twin_read(n) for n in walk(child)):
                self.out.bad = True
        return None

    def _subscript(self, node: ast.Subscript, env: dict) -> int | None:
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            self._expr(value.value, env)
            self._expr(node.slice, env)
            return HOST
        kind = self._expr(value, env)
        if kind in (INT, FLOAT):
            if isinstance(node.slice, ast.Constant):
                return kind  # an element of a tuple of our numbers
            self.out.bad = True
            return None
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            if isinstance(part, ast.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if self._expr(bound, env) is FLOAT:
                        self.out.bad = True
            elif self._expr(part, env) in (INT, FLOAT):
                self.out.bad = True  # a 0-d tensor index and an int index are not the same indexing
        return None

    def _call(self, node: ast.Call, env: dict) -> int | None:  # noqa: C901 - one case per callee kind
        func = node.func
        qual = self.sf.imports.qualname(func)
        rounding = self._rounding(node)
        if rounding is not None:
            inner, name = rounding
            if self._expr(inner, env) in (INT, FLOAT):
                self.out.rounding.append((node, inner, name))
                return INT
            self._expr(inner, env)
            return None
        args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
        if isinstance(func, ast.Name) and func.id in ("max", "min", "int", "abs") and not node.keywords:
            kinds = [self._expr(a, env) for a in args]
            if not any(k in (INT, FLOAT) for k in kinds):
                return HOST if kinds and all(k == HOST for k in kinds) else None
            if not all(k in (HOST, INT, FLOAT) for k in kinds) or (func.id == "int" and FLOAT in kinds):
                self.out.bad = True
                return None
            return _worst(*kinds)
        if isinstance(func, ast.Name) and func.id == "len":
            self._expr(args[0], env) if args else None
            return HOST
        if qual == "torch.nn.functional.pad":
            kinds = [self._expr(a, env) for a in args] + [self._expr(k.value, env) for k in node.keywords]
            pad_at = [i for i, a in enumerate(args) if i == 1] + [
                len(args) + i for i, k in enumerate(node.keywords) if k.arg == "pad"
            ]
            if any(k in (INT, FLOAT) for i, k in enumerate(kinds) if i not in pad_at) or FLOAT in kinds:
                self.out.bad = True
            return None
        if isinstance(func, ast.Name) and func.id == "range":
            if any(self._expr(a, env) == FLOAT for a in args):
                self.out.bad = True
            return None
        callee = self._own_method(func)
        if callee is not None:
            return self._own_call(node, callee, env)
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if (
            receiver is not None
            and isinstance(func, ast.Attribute)
            and func.attr == "size"
            and not node.keywords
        ):
            if len(args) == 1 and self._expr(args[0], env) == HOST:
                self._expr(receiver, env)
                return HOST
        if receiver is not None and self._expr(receiver, env) in (INT, FLOAT):
            self.out.bad = True
        values = args + [k.value for k in node.keywords]
        if any(self._expr(v, env) in (INT, FLOAT) for v in values):
            self.out.bad = True  # a callee we cannot see gets an int where it got a tensor
        return None

    def _rounding(self, node: ast.Call) -> tuple[ast.expr, str] | None:
        """(x, "ceil") of `torch.ceil(x).to(torch.int64)` or `torch.ceil(x).long()`."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)):
            return None
        inner = func.value
        name = _ROUNDING.get(self.sf.imports.qualname(inner.func) or "")
        if name is None or len(inner.args) != 1 or inner.keywords:
            return None
        to_long = (
            func.attr == "to"
            and len(node.args) == 1
            and not node.keywords
            and self.sf.imports.qualname(node.args[0]) in _INT_DTYPES
        )
        if to_long or (func.attr == "long" and not node.args and not node.keywords):
            return inner.args[0], name
        return None

    def _own_method(self, func: ast.expr) -> ast.FunctionDef | None:
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", self.cls.name)
        ):
            return _method(self.cls, func.attr)
        return None

    def _own_call(self, node: ast.Call, callee: ast.FunctionDef, env: dict) -> int | None:
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in callee.decorator_list)
        params = [a.arg for a in callee.args.posonlyargs + callee.args.args]
        if not static:
            params = params[1:]
        handed = self.out.calls.setdefault(callee.name, {})
        for i, arg in enumerate(node.args):
            kind = self._expr(arg.value if isinstance(arg, ast.Starred) else arg, env)
            if kind in (INT, FLOAT):
                if isinstance(arg, ast.Starred) or i >= len(params):
                    self.out.bad = True
                else:
                    handed[params[i]] = _worst(handed.get(params[i]), kind)
        for keyword in node.keywords:
            kind = self._expr(keyword.value, env)
            if kind in (INT, FLOAT):
                if keyword.arg is None:
                    self.out.bad = True
                else:
                    handed[keyword.arg] = _worst(handed.get(keyword.arg), kind)
        if callee.name in self.active:
            return self.returned.get(callee.name)
        return None


def _called_from_outside(sf: SourceFile, cls: ast.ClassDef, name: str, owners: dict) -> bool:
    """`name` is called somewhere other than through `self` in this class (or a subclass)."""
    for node in walk(sf.tree):
        if isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Load):
            receiver = node.value
            inside = isinstance(receiver, ast.Name) and receiver.id == "self"
            if not (inside and _same_class(owners.get(id(node), (None,))[0], cls)):
                return True
    return False


def _plan(sf: SourceFile, cls: ast.ClassDef, twins: set[str], owners: dict) -> dict[str, _Reading]:
    """Which methods read the twins (and with what edits): all methods start in; a method that
    cannot take numbers leaves, and takes with it what could then hand it, or take from it, a number."""
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"]
    plan: dict = {"active": {m.name for m in methods}, "params": {}, "returns": {}}
    for _ in range(8 * len(methods) + 8):
        readings = {
            m.name: _MethodReader(sf, cls, m, twins, plan).run() for m in methods if m.name in plan["active"]
        }
        params: dict[str, dict[str, int]] = {}
        for reading in readings.values():
            for callee, handed in reading.calls.items():
                into = params.setdefault(callee, {})
                for param, kind in handed.items():
                    into[param] = _worst(into.get(param), kind)
        returns = {name: r.returns for name, r in readings.items()}
        if params != plan["params"] or returns != plan["returns"]:
            plan = {"active": plan["active"], "params": params, "returns": returns}
            continue  # what each method hands on is still settling: judge once it holds
        active = set(plan["active"])
        for name, reading in readings.items():
            if reading.returns is not None and (
                not name.startswith("_")
                or name.startswith("__")
                or _called_from_outside(sf, cls, name, owners)
            ):
                reading.bad = True
            if any(handed and callee not in active for callee, handed in reading.calls.items()):
                reading.bad = True
        dropped = {name for name, r in readings.items() if r.bad}
        if not dropped:
            return readings
        for name in dropped:
            # what it called for a number would now hand it one it cannot take
            active -= {c for c, r in readings.items() if r.returns is not None and c in readings[name].calls}
        plan = {"active": active - dropped, "params": {}, "returns": {}}
    return {}


# ---------------------------------------------------------------- the fix


def _enclosing_class(sf: SourceFile, test: ast.expr) -> ast.ClassDef | None:
    """The innermost class around an `if` statement's test: the innermost whose lines hold it (a
    statement inside a class's lines is in its body, and a nested class starts on a later line)."""
    around = [
        c
        for c in _classes(sf.tree)
        if c.lineno <= test.lineno and test.end_lineno <= (c.end_lineno or c.lineno)
    ]
    return max(around, key=lambda c: c.lineno, default=None)


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    return made_once(
        "classes", tree, lambda t: [n for n in iter_statements(t) if isinstance(n, ast.ClassDef)]
    )


def _line_start(sf: SourceFile, stmt: ast.stmt) -> str:
    first = sf.line_text(stmt.lineno)
    return first[: len(first) - len(first.lstrip())]


def _free(sf: SourceFile, name: str) -> bool:
    """No name or attribute in the file is spelled `name` yet."""
    return not any(
        (isinstance(n, ast.Name) and n.id == name)
        or (isinstance(n, ast.Attribute) and n.attr == name)
        or (isinstance(n, ast.arg) and n.arg == name)
        for n in walk(sf.tree)
    )


def int_twin_fix(sf: SourceFile, test: ast.expr) -> Fix | None:
    """The fix for a branch on numbers made from a class's 0-d int buffers, or None."""
    cls = _enclosing_class(sf, test)
    if cls is None:
        return None
    buffers, init, tensor_reads = int_buffers(sf, cls)
    if not buffers:
        return None
    owners = _owners(sf.tree)
    buffers = [b for b in buffers if _free(sf, f"{b.name}_int") and _writes_same_value(sf, cls, b, owners)]
    while True:  # an attribute computed from a buffer left out is left out too
        kept = {b.name for b in buffers}
        buffers = [b for b in buffers if _needs(tensor_reads[b.name]) <= kept]
        if len(buffers) == len(kept):
            break
    if not buffers:
        return None
    readings = _plan(sf, cls, {b.name for b in buffers}, owners)
    if not any(id(test) in r.tests for r in readings.values()):
        return None
    wanted = {n.attr for r in readings.values() for n in r.reads}
    for buffer in reversed(buffers):  # later twins are spelled from earlier ones
        if buffer.name in wanted:
            wanted |= _needs(tensor_reads[buffer.name])
    buffers = [b for b in buffers if b.name in wanted]
    locals_needed = sorted({x for b in buffers for x in tensor_reads[b.name] if not x.startswith("self.")})
    init_fn = _method(cls, "__init__")
    if any(not _free(sf, f"{x}_int") for x in locals_needed) or init_fn is None:
        return None
    newline = newline_of(sf.text)
    edits: list[Edit] = []
    for name in locals_needed:
        stmt = init.tensors[name]
        source = _is_int_tensor(sf, stmt.value, init.ints)
        line = f"{_line_start(sf, stmt)}{name}_int = {sf.segment(source)}{newline}"
        edits.append(Edit(stmt.lineno, 1, stmt.lineno, 1, line))
    for buffer in buffers:
        form = _int_form(sf, init, buffer.value, set())
        end = (buffer.stmt.end_lineno or buffer.stmt.lineno) + 1
        if end > len(sf.lines) + 1 or form is None:
            return None
        line = f"{_line_start(sf, buffer.stmt)}self.{buffer.name}_int = {form}{newline}"
        edits.append(Edit(end, 1, end, 1, line))
    twins = {b.name for b in buffers}
    for reading in readings.values():
        reads = [n for n in reading.reads if n.attr in twins]
        inside: set[int] = set()
        for outer, inner, name in reading.rounding:
            held = [n for n in reads if _within(n, inner)]
            inside |= {id(n) for n in held}
            text = spliced(sf, inner, [(n, f"self.{n.attr}_int") for n in held])
            edits.append(sf.replace(outer, f"math.{name}({text})"))
        edits.extend(sf.replace(n, f"self.{n.attr}_int") for n in reads if id(n) not in inside)
    imports = ("import math",) if any(r.rounding for r in readings.values()) else ()
    names = ", ".join(f"`{b.name}`" for b in buffers)
    rounding = ROUNDING.format(bound=CEIL_BOUND) if imports else ""
    message = MESSAGE.format(names=names, rounding=rounding)
    return Fix(Applicability.UNSAFE, message, tuple(sorted(edits)), imports)


def _needs(used: set[str]) -> set[str]:
    """The twinned attributes a twin is spelled from (`self.N` entries of `_int_form`'s `used`)."""
    return {x.removeprefix("self.") for x in used if x.startswith("self.")}


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return any(n is node for n in walk(outer))
