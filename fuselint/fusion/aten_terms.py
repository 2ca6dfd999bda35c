"""ATen nodes as the pattern engine's canonical terms, so a rule's `[pattern]` matches traced graphs.

The source side lowers Python expressions to `fuselint.source.patterns_canon.Term`s, in which
every spelling of one computation coincides (`a / sqrt(b)` and `a * rsqrt(b)` are both
`a * b**-0.5`). This module lowers an FX node of an ATen graph to the same terms: an ATen op
`aten.<name>` is the torch function `torch.<name>` when that function's signature (from
`torch_signatures.json`) accepts the node's arguments by their schema names; its arguments are
bound through the same `normalize_call`, so the canonical identities apply unchanged. A
`getitem` of `var_mean` is the `var` or the `mean` it holds. Anything else (placeholders,
parameters, ops with no torch function of that name) is a leaf that a metavariable may bind.

A node's sum or product is one operand of the node that reads it (an `inl` that is sealed), so
a metavariable binds it whole; the other identities (`/ sqrt` is `* rsqrt`) cross nodes.

Dimensions are made negative (`amax(x, [2])` on a 3-d tensor is `amax(x, -1)`), since rules
write the last dimension as `-1` and a traced graph keeps whatever the user wrote.
"""

from __future__ import annotations

import operator

import torch

from fuselint.source.patterns_canon import ALIASES, SEALED, Builder, Interner, Term, normalize_call

# getitem of a var_mean: index -> the torch function whose value it is
_VAR_MEAN = {0: "torch.var", 1: "torch.mean"}


class AtenTerms:
    """Terms of one FX graph's nodes, built once each; `Term.node` is the FX node it stands for."""

    def __init__(self) -> None:
        self.builder = Builder(Interner())
        self._terms: dict[torch.fx.Node, Term] = {}

    def term(self, n: torch.fx.Node) -> Term:
        found = self._terms.get(n)
        if found is None:
            # The inputs' terms first, deepest first, so that lowering a node finds its inputs'
            # terms built: a whole model's graph is hundreds of nodes deep, past Python's recursion
            # limit were each node to build its inputs' terms itself (timm's MobileNetV3).
            for node in self._unbuilt_inputs_first(n):
                self._terms[node] = self._lower(node) or self.builder.make("n", value=node.name, node=node)
            found = self._terms[n]
        return found

    def _unbuilt_inputs_first(self, n: torch.fx.Node) -> list[torch.fx.Node]:
        """`n` and the nodes it reads, transitively, that have no term yet, each after its inputs."""
        order: list[torch.fx.Node] = []
        expanded: set[torch.fx.Node] = set()
        stack = [(n, False)]
        while stack:
            node, inputs_done = stack.pop()
            if inputs_done:
                order.append(node)
            elif node not in expanded and node not in self._terms:
                expanded.add(node)
                stack.append((node, True))
                stack.extend((a, False) for a in node.all_input_nodes if a not in expanded)
        return order

    def _value(self, a: object) -> Term | None:
        if isinstance(a, torch.fx.Node):
            t = self.term(a)
            if t.op in ("add", "mul"):
                # Another node's sum stays one operand: `h - mean(h)` with h = a + b must read
                # as (h) - mean(h), as the rule writes it, not as a + b - mean(h).
                return self.builder.make("inl", (t,), node=a, use=SEALED)
            return t
        if isinstance(a, (list, tuple)):
            items = [self._value(x) for x in a]
            return None if None in items else self.builder.make("t", tuple(items))
        if a is None or isinstance(a, (bool, int, float)):
            return self.builder.const(a)
        return None  # dtypes, devices, layouts: no term of the pattern language spells them here

    def _lower(self, n: torch.fx.Node) -> Term | None:
        if n.op != "call_function":
            return None
        if n.target is operator.getitem:
            return self._var_mean_item(n)
        schema = getattr(n.target, "_schema", None)
        packet = getattr(getattr(n.target, "overloadpacket", None), "__name__", "")
        name = f"torch.{packet}"
        if schema is None or name not in ALIASES:
            return None
        bound = _bind(schema, n.args, n.kwargs)
        if bound is None:
            return None
        return self._call(name, n, bound, rank=_rank(n) if packet == "unsqueeze" else _rank(n.args[0]))

    def _var_mean_item(self, n: torch.fx.Node) -> Term | None:
        source, index = n.args
        if not isinstance(source, torch.fx.Node) or index not in _VAR_MEAN:
            return None
        packet = getattr(getattr(source.target, "overloadpacket", None), "__name__", "")
        if packet != "var_mean" or getattr(source.target, "_schema", None) is None:
            return None
        bound = _bind(source.target._schema, source.args, source.kwargs)
        if bound is None:
            return None
        if index == 1:
            bound.pop("correction", None)  # the mean does not depend on it
        return self._call(_VAR_MEAN[index], n, bound, rank=_rank(source.args[0]))

    def _call(self, name: str, n: torch.fx.Node, bound: dict[str, object], rank: int | None) -> Term | None:
        if rank is not None and "dim" in bound:
            bound["dim"] = _negative(bound["dim"], rank)
        kw = {}
        for key, value in bound.items():
            term = self._value(value)
            if term is None:
                return None
            kw["input" if key == "self" else key] = term
        return normalize_call(self.builder, name, [], kw, node=n)


def _bind(schema, args: tuple, kwargs: dict) -> dict[str, object] | None:
    """The node's arguments by their schema names (positional ones included)."""
    names = [a.name for a in schema.arguments]
    if len(args) > len(names):
        return None
    bound = dict(zip(names, args, strict=False))
    bound.update(kwargs)
    return bound


def _rank(a: object) -> int | None:
    val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
    return val.dim() if isinstance(val, torch.Tensor) else None


def _negative(dim: object, rank: int) -> object:
    if isinstance(dim, int) and not isinstance(dim, bool):
        return dim - rank if dim >= 0 else dim
    if isinstance(dim, (list, tuple)):
        return [_negative(d, rank) for d in dim]
    return dim


def cone(root: torch.fx.Node, stop: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """`root` and the call nodes it is computed from, not reaching into (or past) `stop`."""
    seen: set[torch.fx.Node] = set()
    todo = [root]
    while todo:
        n = todo.pop()
        if n in seen or n in stop or n.op != "call_function":
            continue
        seen.add(n)
        todo.extend(n.all_input_nodes)
    return seen
