"""Canonical terms: one shape for every spelling of the same tensor expression.

The pattern engine never matches `ast` directly. Both the rule's pattern and the user's
code are lowered to a `Term` tree in which the spellings that compute the same thing
coincide:

- calls are resolved through the file's imports and put in one signature order:
  `x.sigmoid()`, `F.sigmoid(x)`, `torch.special.expit(x)` and `from torch import sigmoid`
  all become `f:torch.sigmoid(x)`; keyword and positional arguments coincide and
  arguments equal to their default are dropped (`keepdim=False`);
- `+` and `*` are n-ary and commutative (`add`, `mul` with sorted operands), `a - b`
  is `a + (-1)*b`, `a / b` is `a * b**-1`, `x * x` is `x**2`, `sqrt`/`rsqrt`/`reciprocal`/
  `square` are powers, `relu`/`relu6`/`hardtanh` are `clamp`s;
- constant sub-expressions (`math.sqrt(2 / math.pi)`, `1 / 6`) are folded to numbers;
- a name assigned earlier in the same block is replaced by its value inside an `inl`
  wrapper that remembers where it was used, so a pattern spread over temporaries
  matches as one expression and the fix knows which statements it consumed.

Every rewrite here is an identity of real arithmetic that holds for every input
(up to rounding), so matching through it never claims a look-alike.
"""

from __future__ import annotations

import ast
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

REQUIRED = object()
# The `use` of an `inl` that sums and products must not flatten into: a traced node's own value
# (fuselint.fusion.aten_terms), which a metavariable may bind whole.
SEALED = object()
_HERE = Path(__file__).parent

# canonical function -> its parameters in order, with defaults (REQUIRED when none).
PARAMS: dict[str, tuple[tuple[str, object], ...]] = {}
# any spelling's qualified name -> (canonical name, that spelling's positional parameter names)
ALIASES: dict[str, tuple[str, tuple[str, ...]]] = {}


def _parse_params(params: str) -> tuple[tuple[str, object], ...]:
    """`"input,dim=None,keepdim=False"` -> (("input", REQUIRED), ("dim", None), ("keepdim", False))."""
    parsed: list[tuple[str, object]] = []
    for part in filter(None, (p.strip() for p in params.split(","))):
        name, _, default = part.partition("=")
        parsed.append((name, ast.literal_eval(default) if default else REQUIRED))
    return tuple(parsed)


def _generated_default(param: dict) -> object:
    if "default" not in param:
        return REQUIRED
    value = param["default"]
    return tuple(value) if isinstance(value, list) else value


def _load_signatures() -> frozenset[str]:
    """Fill PARAMS and ALIASES from the data files; return the names that are also Tensor methods.

    `torch_signatures.json` (generated from torch's schemas, see scripts/gen_signatures.py) gives
    every function's own signature; `spellings.toml` (written by hand) says which names are one
    function and fixes a signature where overloads differ. Both are data: a new spelling or a
    new function never needs code here.
    """
    generated = json.loads((_HERE / "torch_signatures.json").read_text(encoding="utf-8"))
    for qual, params in generated["functions"].items():
        PARAMS[qual] = tuple((p["name"], _generated_default(p)) for p in params)
        ALIASES[qual] = (qual, tuple(p["name"] for p in params if not p.get("keyword_only")))
    methods = set(generated["methods"])
    spellings = tomllib.loads((_HERE / "spellings.toml").read_text(encoding="utf-8"))["functions"]
    for canonical, entry in spellings.items():
        if "params" in entry:
            PARAMS[canonical] = _parse_params(entry["params"])
            ALIASES[canonical] = (canonical, tuple(n for n, _ in PARAMS[canonical]))
        order = ALIASES[canonical][1]
        spelled = entry.get("spelled", {})
        for spelling in (canonical, *entry.get("spellings", ())):
            custom = spelled.get(spelling)
            ALIASES[spelling] = (canonical, tuple(custom.split(",")) if custom else order)
            if spelling.startswith("torch.") and spelling.count(".") == 1:
                methods.add(spelling.split(".")[1])
    return frozenset(methods)


_METHOD_NAMES = _load_signatures()

# Canonical functions that source words other than their own names lower to, by the lowering
# code (identities.toml adds its own, see `_identity_words`), for the engine's cheap text
# pre-filter: which source words can produce each canonical op.
LOWERED_FROM = {
    "torch.amax": ("max",),
    "torch.transpose": ("mT",),
    "Tensor.to": ("to", "type", "float", "double", "half", "bfloat16"),
    # operators, and the mirrored spellings (`a < b` is `b > a`)
    "torch.gt": (">", "<"),
    "torch.ge": (">=", "<="),
    "torch.eq": ("==",),
    "torch.ne": ("!=",),
}


def source_words(op: str) -> frozenset[str] | None:
    """Identifiers one of which must appear in code that lowers to canonical `op` (None: no such word)."""
    if op == "mm":
        return frozenset({"@", "matmul", "mm", "bmm"})
    if not op.startswith("f:"):
        return None
    name = op[2:]
    words = {alias.rsplit(".", 1)[1] for alias, (canonical, _) in ALIASES.items() if canonical == name}
    words |= set(LOWERED_FROM.get(name, ()))
    words |= _identity_words(op)
    if name.startswith("torch.") and name.count(".") == 1:
        words.add(name.rsplit(".", 1)[1])
    return frozenset(words) or None


def _identity_words(op: str) -> set[str]:
    """Words of the functions that identities.toml rewrites into `op` (relu6 for torch.clamp)."""
    words: set[str] = set()
    for (name, _arity), (_params, result) in identities().items():
        if op in result.ops and "f:" + name != op:
            words |= source_words("f:" + name) or set()
    return words


# Tensor methods that are the torch function of the same name with the tensor first.
METHODS = {name: f"torch.{name}" for name in _METHOD_NAMES}
METHODS.pop("cat", None)
METHODS.pop("stack", None)
METHODS["to"] = "Tensor.to"
METHODS["type"] = "Tensor.to"
CAST_METHODS = {
    "float": "torch.float32",
    "double": "torch.float64",
    "half": "torch.float16",
    "bfloat16": "torch.bfloat16",
}
DTYPE_ALIASES = {
    "torch.float": "torch.float32",
    "torch.double": "torch.float64",
    "torch.half": "torch.float16",
}
# Receivers that are never tensors: `self.norm(x)` is a submodule, not torch.norm.
NOT_TENSORS = {"self", "cls", "super"}

# Constant folding: math functions of constants are constants.
MATH_FUNCS = {
    "math.sqrt": math.sqrt,
    "math.exp": math.exp,
    "math.log": math.log,
    "math.tanh": math.tanh,
    "math.erf": math.erf,
    "math.pow": math.pow,
    "numpy.sqrt": math.sqrt,
    "numpy.exp": math.exp,
    "numpy.log": math.log,
    "float": float,
}
MATH_CONSTS = {
    "math.pi": math.pi,
    "math.e": math.e,
    "numpy.pi": math.pi,
    "numpy.e": math.e,
    "torch.pi": math.pi,
}


@dataclass(eq=False, slots=True)
class Term:
    """One node of a canonical expression. `key` is equal for structurally equal terms."""

    op: str
    args: tuple[Term, ...] = ()
    value: object = None
    node: ast.AST | None = None
    stmt: int = -1  # index of the statement (in its block) that holds `node`
    key: int = 0
    ops: frozenset = frozenset()  # the `f:` and arithmetic ops inside, for O(1) rejection
    use: object = None  # for op "inl": the Binding whose value this is
    # add/mul only: reads of temporaries whose sums/products were spliced into this one
    absorbed: tuple = ()
    # add/mul that spliced a temporary's sum/product: the reading with that temporary kept whole
    # (`h = a + b; h - mean(h)` is also (h) - mean(h)), which the matcher tries when this fails
    alt: Term | None = None


@dataclass
class Interner:
    """Hash-consing: structurally equal terms get the same small integer key."""

    table: dict = field(default_factory=dict)

    def key(self, op: str, value: object, args: tuple[Term, ...]) -> int:
        sig = (op, _value_key(value), tuple(a.key for a in args))
        found = self.table.get(sig)
        if found is None:
            found = self.table[sig] = len(self.table) + 1
        return found


def _value_key(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_number(term: Term) -> bool:
    return term.op == "c" and isinstance(term.value, (int, float)) and not isinstance(term.value, bool)


def strip(term: Term) -> Term:
    while term.op == "inl":
        term = term.args[0]
    return term


class Builder:
    """Makes canonical terms, folding and flattening as it goes."""

    def __init__(self, interner: Interner, identities: bool = True) -> None:
        self.interner = interner
        self.identities = identities  # off only while identities.toml itself is read

    def make(
        self,
        op: str,
        args: tuple[Term, ...] = (),
        value: object = None,
        node=None,
        stmt=-1,
        use=None,
        absorbed=(),
    ):
        if op == "inl":
            key = args[0].key
        else:
            key = self.interner.key(op, value, args)
        ops = frozenset().union(*(a.ops for a in args)) if args else frozenset()
        if op not in ("c", "n", "q", "a", "i", "t", "inl", "var", "opaque", "sl"):
            ops = ops | {op}
        return Term(op, args, value, node, stmt, key, ops, use, absorbed)

    def const(self, value: object, node=None, stmt=-1) -> Term:
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            value = int(value)
        return self.make("c", value=value, node=node, stmt=stmt)

    # ---- arithmetic with canonical shapes

    def _flatten(self, op: str, terms: list[Term], whole: bool = False) -> tuple[list[Term], tuple]:
        """Operands of nested sums (products), through temporaries: `c = a * b; c * d` is a*b*d
        (unless `whole`: then a temporary stays one operand)."""
        flat: list[Term] = []
        absorbed: list = []
        for t in terms:
            inner, reads = t, []
            while inner.op == "inl" and inner.use is not SEALED and not whole:
                reads.append(inner.node)
                inner = inner.args[0]
            if inner.op == op:
                flat.extend(inner.args)
                absorbed.extend(reads)
                absorbed.extend(inner.absorbed)
            else:
                flat.append(t)
        return flat, tuple(absorbed)

    def add(self, terms: list[Term], node=None, stmt=-1) -> Term:
        return self._with_alt("add", self._add, terms, node, stmt)

    def mul(self, terms: list[Term], node=None, stmt=-1) -> Term:
        return self._with_alt("mul", self._mul, terms, node, stmt)

    def _with_alt(self, op: str, build, terms: list[Term], node, stmt) -> Term:
        term = build(terms, node, stmt)
        spliced = any(t.op == "inl" and t.use is not SEALED and strip(t).op == op for t in terms)
        if spliced and term.op == op:
            alt = build(terms, node, stmt, whole=True)
            if alt.op == op:
                term.alt = alt
        return term

    def _add(self, terms: list[Term], node=None, stmt=-1, whole: bool = False) -> Term:
        flat, absorbed = self._flatten("add", terms, whole)
        total = 0
        rest, numbers = [], []
        for t in flat:
            if is_number(t):
                total += t.value
                numbers.append(t)
            else:
                rest.append(t)
        if total != 0 or not rest:
            # A lone constant keeps its source text (`1e-5` stays `1e-5` in a fix).
            rest.append(numbers[0] if len(numbers) == 1 else self.const(total))
        if len(rest) == 1 and not absorbed:
            return self._renode(rest[0], node, stmt)
        if len(rest) == 1:
            return self.make("add", (rest[0], self.const(0)), node=node, stmt=stmt, absorbed=absorbed)
        rest.sort(key=lambda t: t.key)
        return self.make("add", tuple(rest), node=node, stmt=stmt, absorbed=absorbed)

    def _mul(self, terms: list[Term], node=None, stmt=-1, whole: bool = False) -> Term:
        flat, absorbed = self._flatten("mul", terms, whole)
        product = 1
        numbers: list[Term] = []
        powers: dict[int, tuple[Term, list[Term]]] = {}
        order: list[int] = []
        for t in flat:
            if is_number(t):
                product *= t.value
                numbers.append(t)
                continue
            base, exponent = t, None
            if t.op == "pow" and is_number(t.args[1]):
                base, exponent = t.args[0], t.args[1]
            exponent = exponent or self.const(1)
            if base.key not in powers:
                powers[base.key] = (base, [])
                order.append(base.key)
            powers[base.key][1].append((t, exponent))
        rest: list[Term] = []
        for k in order:
            base, parts = powers[k]
            if len(parts) == 1:
                rest.append(parts[0][0])
            else:  # x * x -> x**2, x * x**2 -> x**3
                rest.append(self.pow(base, self.const(sum(e.value for _, e in parts))))
        if product == 0:
            return self.const(0, node, stmt)
        if product != 1 or not rest:
            rest.append(numbers[0] if len(numbers) == 1 else self.const(product))
        if len(rest) == 1 and not absorbed:
            return self._renode(rest[0], node, stmt)
        if len(rest) == 1:
            return self.make("mul", (rest[0], self.const(1)), node=node, stmt=stmt, absorbed=absorbed)
        rest.sort(key=lambda t: t.key)
        return self.make("mul", tuple(rest), node=node, stmt=stmt, absorbed=absorbed)

    def pow(self, base: Term, exponent: Term, node=None, stmt=-1) -> Term:
        if is_number(exponent):
            e = exponent.value
            if is_number(base):
                try:
                    return self.const(float(base.value) ** e, node, stmt)
                except (OverflowError, ZeroDivisionError):
                    pass
            if e == 1:
                return self._renode(base, node, stmt)
            inner = strip(base)
            # (b**a)**k == b**(a*k) for integer k wherever both sides are defined.
            if inner.op == "pow" and is_number(inner.args[1]) and float(e).is_integer() and base.op != "inl":
                return self.pow(inner.args[0], self.const(inner.args[1].value * e), node, stmt)
        return self.make("pow", (base, exponent), node=node, stmt=stmt)

    def neg(self, term: Term, node=None, stmt=-1) -> Term:
        return self.mul([self.const(-1), term], node, stmt)

    def div(self, a: Term, b: Term, node=None, stmt=-1) -> Term:
        if is_number(b) and b.value != 0:
            return self.mul([a, self.const(1 / b.value)], node, stmt)
        return self.mul([a, self.pow(b, self.const(-1))], node, stmt)

    def _renode(self, term: Term, node, stmt) -> Term:
        """The same term, now also standing for a larger source node (e.g. `x * 1`)."""
        if node is None or term.node is node:
            return term
        return Term(term.op, term.args, term.value, node, stmt, term.key, term.ops, term.use, term.absorbed)

    # ---- calls in canonical form

    def call(self, name: str, args: list[Term], node=None, stmt=-1) -> Term | None:
        """A resolved torch function with arguments in its own order; None if the call can't be normalised."""
        lowered = self._lower(name, args, node, stmt)
        if lowered is not None:
            return lowered
        return self.make("f:" + name, tuple(args), node=node, stmt=stmt)

    def _lower(self, name: str, args: list[Term], node, stmt) -> Term | None:
        """Functions that are arithmetic in disguise (identities.toml), and one order for symmetric calls."""
        n = len(args)
        identity = identities().get((name, n)) if self.identities else None
        if identity is not None:
            params, result = identity
            return self._instantiate(result, dict(zip(params, args, strict=True)), node, stmt)
        if name in ("torch.eq", "torch.ne") and n == 2 and args[0].key > args[1].key:
            return self.make("f:" + name, (args[1], args[0]), node=node, stmt=stmt)
        if name == "torch.transpose" and n == 3 and all(is_number(a) for a in args[1:]):
            # transpose(-1, -2) is transpose(-2, -1)
            a, b = sorted((args[1], args[2]), key=lambda t: t.value)
            return self.make("f:torch.transpose", (args[0], a, b), node=node, stmt=stmt)
        return None

    def _instantiate(self, t: Term, env: dict[str, Term], node=None, stmt=-1) -> Term:
        """An identity's right side with its metavariables replaced by `env`, built canonically."""
        if t.op == "var":
            return env[t.value]
        if t.op == "c":
            return self.const(t.value)
        args = [self._instantiate(a, env) for a in t.args]
        if t.op == "add":
            return self.add(args, node, stmt)
        if t.op == "mul":
            return self.mul(args, node, stmt)
        if t.op == "pow":
            return self.pow(args[0], args[1], node, stmt)
        if t.op.startswith("f:"):
            return self.call(t.op[2:], args, node, stmt)
        return self.make(t.op, tuple(args), t.value, node=node, stmt=stmt)


_IDENTITIES: dict[tuple[str, int], tuple[tuple[str, ...], Term]] = {}


def identities() -> dict[tuple[str, int], tuple[tuple[str, ...], Term]]:
    """(canonical function, argument count) -> (its metavariables, the term it is), from identities.toml."""
    if not _IDENTITIES:
        from fuselint.source.patterns_match import lower_template  # it lowers through this module

        builder = Builder(Interner(), identities=False)
        table = tomllib.loads((_HERE / "identities.toml").read_text(encoding="utf-8"))["identities"]
        for left, right in table.items():
            call = lower_template(left, builder)
            if not call.op.startswith("f:") or any(a.op != "var" for a in call.args):
                raise ValueError(
                    f"identities.toml: {left!r} must be a call whose arguments are metavariables"
                )
            params = tuple(a.value for a in call.args)
            _IDENTITIES[(call.op[2:], len(params))] = (params, lower_template(right, builder))
    return _IDENTITIES


def normalize_call(
    b: Builder, spelling: str, pos: list[Term], kw: dict[str, Term], node=None, stmt=-1
) -> Term | None:
    """Bind a call's arguments to the canonical signature; None when they don't fit it."""
    canonical, names = ALIASES[spelling]
    if len(pos) > len(names):
        return None
    bound = dict(zip(names, pos, strict=False))
    for k, v in kw.items():
        if k in bound:
            return None
        bound[k] = v
    if "unbiased" in bound:  # var/std: unbiased=False is correction=0
        flag = bound.pop("unbiased")
        if flag.op != "c" or not isinstance(flag.value, bool) or "correction" in bound:
            return None
        bound["correction"] = b.const(1 if flag.value else 0)
    bound.pop("_stacklevel", None)
    params = PARAMS[canonical]
    if set(bound) - {p for p, _ in params}:
        return None
    args: list[Term] = []
    for pname, default in params:
        if pname in bound:
            args.append(bound[pname])
        elif default is REQUIRED:
            return None
        else:
            args.append(b.const(default))
    # Trailing arguments equal to their default are dropped, so both spellings coincide.
    while len(args) > 1:
        default = params[len(args) - 1][1]
        last = args[-1]
        if default is not REQUIRED and last.op == "c" and _value_key(last.value) == _value_key(default):
            args.pop()
        elif default == () and last.op == "t" and not last.args:
            args.pop()
        else:
            break
    # A one-element dim list is that dim.
    for i, (pname, _) in enumerate(params[: len(args)]):
        if pname == "dim" and args[i].op == "t" and len(args[i].args) == 1:
            args[i] = args[i].args[0]
    return b.call(canonical, args, node, stmt)


def fold(name: str, args: list[Term]) -> float | None:
    fn = MATH_FUNCS.get(name)
    if fn is None or not args or not all(is_number(a) for a in args):
        return None
    try:
        return fn(*(a.value for a in args))
    except (ValueError, OverflowError, TypeError, ZeroDivisionError):
        return None
