"""Compiled patterns and the matcher: canonical pattern term against canonical code term.

A pattern is a Python expression template with metavariables (`$x * torch.sigmoid($x)`).
It is lowered once, with the same canonicaliser as the user's code, so matching is a
walk over two canonical trees: same op, same arity, arguments matched in order, except
for `add`/`mul`, whose operands are matched as a multiset (commutativity), and for
metavariables, which bind a code term of their declared kind and must bind equal terms
wherever they repeat. At the root, an `add`/`mul` pattern may match part of a longer
sum or product (`x * sigmoid(x) * y`); the rest is kept around the replacement.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from fuselint.source.imports import ImportTable
from fuselint.source.patterns_canon import Builder, Term, is_number, strip
from fuselint.source.patterns_lower import Lowerer

KINDS = ("tensor", "any", "name", "const", "int", "dim", "scalar", "dtype", "list")
METAVAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
PREFIX = "__mv_"
# Spellings a pattern may use: full names, or the usual `F`/`math`/`nn` aliases.
PATTERN_IMPORTS = ImportTable(
    {"torch": "torch", "math": "math", "F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy"}
)
# Ops that launch no kernel in eager (views, metadata), for the gain count.
FREE_OPS = {"f:torch.unsqueeze", "f:torch.transpose", "f:torch.t", "opaque", "call"}


class PatternError(Exception):
    """A [pattern] table that cannot be compiled; the message names the problem."""


@dataclass(frozen=True)
class VarSpec:
    """A metavariable's kind and conditions (`dim` with last=true must be -1 ...)."""

    name: str
    kind: str = "tensor"
    value: float | None = None  # const: the number it must equal
    tol: float = 1e-5  # relative tolerance for `value`
    last: bool = False  # dim: must be the last dim (-1)
    each: Pattern | None = None  # list: every element matches this
    render: str = ""  # list: how one element is written in the replacement

    def accepts(self, term: Term) -> bool:
        t = strip(term)
        kind = self.kind
        if kind == "any":
            return True
        if kind == "tensor":
            return t.op not in ("c", "q", "t", "sl")
        if kind == "name":  # a stored value (`w`, `self.weight`, `emb.weight`), not a computed one
            return _stored(term)
        if kind == "const":
            return is_number(t) and (self.value is None or close(self.value, t.value, self.tol))
        if kind == "int":
            return is_number(t) and isinstance(t.value, int) and (self.value is None or t.value == self.value)
        if kind == "dim":
            if self.last:
                return is_number(t) and t.value == -1
            return (is_number(t) and isinstance(t.value, int)) or t.op in ("n", "a")
        if kind == "scalar":
            return _scalarish(t)
        if kind == "dtype":
            return t.op in ("q", "n", "a")
        return False


def _stored(t: Term) -> bool:
    if t.op == "inl":
        return False  # a temporary holds a computed value
    if t.op == "n":
        return True
    return t.op == "a" and _stored(t.args[0])


def _scalarish(t: Term) -> bool:
    """A Python number or a value read from a name/attribute, possibly scaled or raised to a constant."""
    t = strip(t)
    if is_number(t) or t.op in ("n", "a", "i"):
        return True
    if t.op == "pow":
        return _scalarish(t.args[0]) and is_number(t.args[1])
    return t.op == "mul" and all(_scalarish(a) for a in t.args)


def close(a: float, b: float, tol: float) -> bool:
    return a == b or abs(a - b) <= tol * max(abs(a), abs(b))


@dataclass
class Pattern:
    """One alternative of a rule's pattern, lowered once."""

    text: str
    term: Term
    vars: dict[str, VarSpec]
    required: frozenset  # ops that must occur in a candidate, for O(1) rejection
    launches: int  # eager kernels the pattern costs
    tol: float = 1e-5
    replace: str = ""  # the replacement template for this alternative
    replace_launches: int = 0


@dataclass
class Match:
    """Bindings of metavariables, the `inl` uses crossed outside them, and the root's leftovers."""

    bindings: dict[str, object] = field(default_factory=dict)
    crossed: list[ast.Name] = field(default_factory=list)
    rest: list[Term] = field(default_factory=list)
    # where the matched operands start in the source, to keep `w * norm(x)` in that order
    anchor: tuple[int, int] | None = None

    def copy(self) -> Match:
        return Match(dict(self.bindings), list(self.crossed), list(self.rest), self.anchor)


def template_ast(text: str) -> ast.expr:
    source = METAVAR.sub(lambda m: PREFIX + m.group(1), " ".join(text.split()))
    try:
        return ast.parse(source, mode="eval").body
    except SyntaxError as exc:
        raise PatternError(f"template does not parse: {text!r}: {exc.msg}") from None


class _PatternLowerer(Lowerer):
    def _Name(self, node: ast.Name) -> Term:
        if node.id.startswith(PREFIX):
            return self.b.make("var", value=node.id[len(PREFIX) :], node=node)
        return super()._Name(node)


def lower_template(text: str, builder: Builder) -> Term:
    return _PatternLowerer(PATTERN_IMPORTS, builder).lower(template_ast(text))


def count_launches(term: Term) -> int:
    """Eager kernels of a term: one per distinct op, n-1 per n-ary sum/product, divides and subtracts are one op."""
    seen: set[int] = set()

    def visit(t: Term, inside: str = "") -> int:
        if t.key in seen or t.op in ("c", "n", "q", "var", "a", "sl", "inl"):
            return sum(visit(a) for a in t.args) if t.op == "inl" else 0
        seen.add(t.key)
        args = sum(visit(a, t.op) for a in t.args)
        if t.op == "pow" and inside == "mul" and is_number(t.args[1]) and t.args[1].value == -1:
            return args  # a / b: the division is the product's op
        negation = len(t.args) == 2 and any(is_number(a) and a.value == -1 for a in t.args)
        if t.op == "mul" and inside == "add" and negation:
            return args  # a - b: the subtraction is the sum's op
        if t.op in ("add", "mul"):
            return args + len(t.args) - 1
        if t.op in FREE_OPS or t.op in ("i", "t"):
            return args
        return args + 1

    return visit(term)


def compile_pattern(text: str, specs: dict[str, VarSpec], builder: Builder, tol: float) -> Pattern:
    term = lower_template(text, builder)
    used = set(METAVAR.findall(text))
    for name in used - set(specs):
        specs[name] = VarSpec(name)
    return Pattern(text, term, specs, term.ops, count_launches(term), tol)


# ---------------------------------------------------------------------- matching


def match_root(p: Pattern, t: Term) -> Iterator[Match]:
    """Every way `p` matches at `t`; an add/mul pattern may leave some of t's operands over.
    Where none does and t spliced a temporary's sum, the reading with it kept whole is tried."""
    found = False
    for m in _match_root(p, t):
        found = True
        yield m
    if not found and t.alt is not None:
        yield from match_root(p, t.alt)


def _match_root(p: Pattern, t: Term) -> Iterator[Match]:
    if p.term.op == t.op:
        if p.term.op in ("add", "mul") and len(t.args) > len(p.term.args):
            yield from _match_ac(
                p, p.term.args, list(t.args), Match(crossed=list(t.absorbed)), allow_rest=True
            )
        else:
            yield from match(p, p.term, t, Match())
    elif t.op in ("add", "mul"):
        # The pattern may be one operand of a sum or product: `y / (1 + exp(-x))`. An operand
        # with its own source node is matched there instead, so that only it is rewritten and
        # `2.0 * (s * (exp(h) - 1))` keeps its grouping.
        for j, operand in enumerate(t.args):
            if strip(operand).op == p.term.op and not _own_node(operand, t):
                for m in match(p, p.term, operand, Match()):
                    m.rest = [a for k, a in enumerate(t.args) if k != j]
                    m.anchor = position(operand)
                    yield m


def _own_node(operand: Term, t: Term) -> bool:
    node = operand.node
    return operand.op != "inl" and node is not None and node is not t.node and operand.stmt == t.stmt


def match(p: Pattern, pt: Term, t: Term, m: Match) -> Iterator[Match]:
    if pt.op == "var":
        yield from _bind(p, pt.value, t, m)
        return
    if t.op == "inl":
        m = m.copy()
        while t.op == "inl":
            m.crossed.append(t.node)
            t = t.args[0]
    if pt.op == "c":
        if t.op == "c" and _const_equal(pt.value, t.value, p.tol):
            yield m
        return
    if pt.op in ("add", "mul") and t.op == pt.op:
        found = False
        if len(pt.args) == len(t.args):
            for m2 in _match_ac(p, pt.args, list(t.args), _crossing(m, t.absorbed), allow_rest=False):
                found = True
                yield m2
        if not found and t.alt is not None:
            yield from match(p, pt, t.alt, m)
        return
    if pt.op != t.op or pt.value != t.value or len(pt.args) != len(t.args):
        return
    yield from _match_seq(p, pt.args, t.args, 0, m)


def _crossing(m: Match, nodes: tuple) -> Match:
    if not nodes:
        return m
    m = m.copy()
    m.crossed.extend(nodes)
    return m


def position(t: Term) -> tuple[int, int] | None:
    node = t.node
    return (node.lineno, node.col_offset) if node is not None and hasattr(node, "lineno") else None


def _const_equal(a: object, b: object, tol: float) -> bool:
    """Pattern constant `a` against code constant `b`.

    A constant the rule writes out in a few digits (`1`, `0.5`, `0.044715`) must be met
    exactly: `log(1 - p + 1e-8)` is not `log1p(-p)`. Only long constants, which people
    truncate (`sqrt(2 / pi)` written `0.7978845608`), are met within the relative `tol`.
    """
    numbers = (int, float)
    if (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return close(float(a), float(b), tol if _long(float(a)) else 1e-12)
    return type(a) is type(b) and a == b


def _long(value: float) -> bool:
    digits = f"{abs(value):.15e}".split("e")[0].replace(".", "").rstrip("0")
    return len(digits) > 8


def _match_seq(p: Pattern, pargs, targs, i: int, m: Match) -> Iterator[Match]:
    if i == len(pargs):
        yield m
        return
    for m2 in match(p, pargs[i], targs[i], m):
        yield from _match_seq(p, pargs, targs, i + 1, m2)


def _match_ac(p: Pattern, pargs, targs: list[Term], m: Match, allow_rest: bool) -> Iterator[Match]:
    # Match the most constrained operands first: metavariables last.
    order = sorted(pargs, key=lambda a: a.op == "var")

    def go(i: int, used: frozenset, m: Match) -> Iterator[Match]:
        if i == len(order):
            rest = [t for j, t in enumerate(targs) if j not in used]
            if rest and not allow_rest:
                return
            m2 = m.copy()
            m2.rest = rest
            starts = [position(t) for j, t in enumerate(targs) if j in used]
            m2.anchor = min((p for p in starts if p is not None), default=None)
            yield m2
            return
        for j, t in enumerate(targs):
            if j not in used:
                for m2 in match(p, order[i], t, m):
                    yield from go(i + 1, used | {j}, m2)

    yield from go(0, frozenset(), m)


def _bind(p: Pattern, name: str, t: Term, m: Match) -> Iterator[Match]:
    spec = p.vars.get(name) or VarSpec(name)
    if spec.kind == "list":
        yield from _bind_list(p, spec, t, m)
        return
    bound = m.bindings.get(name)
    if bound is not None:
        if bound.key == t.key:
            yield m
        return
    if not spec.accepts(t):
        return
    m2 = m.copy()
    m2.bindings[name] = t
    yield m2


def _bind_list(p: Pattern, spec: VarSpec, t: Term, m: Match) -> Iterator[Match]:
    """A list/tuple of at least two elements, each matching `spec.each` (element vars are local)."""
    inner = strip(t)
    if inner.op != "t" or len(inner.args) < 2 or spec.each is None or spec.name in m.bindings:
        return
    local = set(spec.each.vars) - set(p.vars)
    each = Pattern(spec.each.text, spec.each.term, {**spec.each.vars, **p.vars}, frozenset(), 0, p.tol)
    elements: list[dict[str, Term]] = []
    current = m
    for element in inner.args:
        found = next(match(each, each.term, element, current), None)
        if found is None:
            return
        elements.append({k: found.bindings.pop(k) for k in local if k in found.bindings})
        current = found
    current = current.copy()
    current.bindings[spec.name] = (t, elements)
    yield current
