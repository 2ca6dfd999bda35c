"""A pad after pointwise ops, moved before them: one kernel reads the memory it pads.

TF-style "same" padding (`F.pad` before a strided depthwise convolution, as Hugging Face's
MobileNetV2 and EfficientNet do) pads the output of BatchNorm + ReLU6. Planned as one kernel,
the pad's data is computed inside it (a prologue), but the lowering reads a pad's data only
from memory, so the group split in two: the pointwise kernel writes the activations, the pad
kernel reads them and writes them again, bordered (51 pad kernels, 282 µs per call of
MobileNetV2 on an H100, docs/NOTES.md).

This pass rewrites, before planning,

    pad(f(x, per_channel...), p, fill)  ->  where(inside, f(pad(x, p, 0), per_channel...), fill)

where f is a chain of elementwise ops that nothing else reads, x stands for each of its
operands of the full shape (memory, or any op outside the chain), the other operands broadcast
without varying along the padded dims, and `inside` marks the unpadded positions (a constant of
the padded dims' shape, made once at compile time). Inside, f computes the same ops on the same
values as before (in a generated kernel, the same instructions per element); the border is
`fill` as before. A chain that something else reads too stays where it is (moving the pad
would compute it twice). The chain's ops and the
pads of its operands then sit in the padded space of one kernel, which reads x through a shifted,
masked load.
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.graph.layout import fake_value, rewrite_each

aten = torch.ops.aten
prims = torch.ops.prims


# Integer forms fail on a zero divisor (CPU), which the moved chain meets at the border
_INTEGER_DIVISIONS = frozenset({aten.div, aten.floor_divide, aten.remainder, aten.fmod})


def _elementwise(node: torch.fx.Node) -> bool:
    """Same-shape arithmetic with no effect but its value: pointwise ops and plain casts."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    target = node.target
    if torch.Tag.nondeterministic_seeded in target.tags or target._schema.is_mutable:
        return False
    val = node.meta.get("val")
    if target.overloadpacket in _INTEGER_DIVISIONS and not (
        isinstance(val, torch.Tensor) and val.dtype.is_floating_point
    ):
        return False
    if target is prims.convert_element_type.default:
        return True
    if target is aten._to_copy.default:
        return set(node.kwargs) <= {"dtype"}
    return torch.Tag.pointwise in target.tags


def _shape(node: object) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _chain(pad: torch.fx.Node) -> list[torch.fx.Node]:
    """The elementwise ops of the pad's input shape that only the pad reads (through each other),
    in graph order; empty when its input is no such op."""
    src = pad.args[0]
    full = _shape(src)
    chain: set[torch.fx.Node] = set()
    todo = [src]
    while todo:
        node = todo.pop()
        if node in chain or not _elementwise(node) or _shape(node) != full:
            continue
        chain.add(node)
        todo.extend(a for a in node.all_input_nodes if a not in chain)
    # keep only nodes whose every reader is the pad or in the chain (a shared value is computed
    # once, where it is, and read from memory as an operand)
    changed = True
    while changed:
        changed = False
        for node in list(chain):
            if any(u is not pad and u not in chain for u in node.users):
                chain.discard(node)
                changed = True
    if src not in chain:
        return []
    order = {n: i for i, n in enumerate(pad.graph.nodes)}
    return sorted(chain, key=order.__getitem__)


def _operands_fit(chain: list[torch.fx.Node], full: tuple[int, ...], padded_dims: set[int]) -> bool:
    """Every operand from outside the chain has the full shape or broadcasts along the padded dims."""
    members = set(chain)
    k = len(full)
    for node in chain:
        for a in node.all_input_nodes:
            if a in members:
                continue
            shape = _shape(a)
            if shape is None or len(shape) > k:
                return False
            if shape == full:
                continue
            aligned = (1,) * (k - len(shape)) + shape
            if any(aligned[d] != 1 for d in padded_dims):
                return False
    return True


def sink_pads(gm: torch.fx.GraphModule) -> int:
    """Move each constant_pad_nd after an elementwise chain before it (module docstring); how many."""
    pads = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is aten.constant_pad_nd.default]
    return rewrite_each(gm, pads, _sink)


def _sink(graph: torch.fx.Graph, pad: torch.fx.Node) -> int:
    widths = list(pad.args[1])
    fill = pad.args[2] if len(pad.args) > 2 else pad.kwargs.get("value", 0)
    src = pad.args[0]
    full = _shape(src)
    if full is None or len(widths) % 2 or len(widths) // 2 > len(full) or any(w < 0 for w in widths):
        return 0
    k = len(full)
    padded_dims = {k - 1 - i // 2 for i in range(0, len(widths), 2)}
    chain = _chain(pad)
    if not chain or not _operands_fit(chain, full, padded_dims):
        return 0
    out = pad.meta["val"]
    members = set(chain)
    new: dict[torch.fx.Node, torch.fx.Node] = {}
    padded: dict[torch.fx.Node, torch.fx.Node] = {}
    made: list[torch.fx.Node] = []

    def add(target, args: tuple, kwargs: dict | None = None, like: torch.fx.Node = pad) -> torch.fx.Node:
        node = graph.call_function(target, args, kwargs or {})
        node.meta = dict(like.meta)
        node.meta["val"] = fake_value(node)
        made.append(node)
        return node

    def operand(a: object) -> object:
        if not isinstance(a, torch.fx.Node):
            return a
        if a in members:
            return new[a]
        if _shape(a) != full:
            return a  # broadcast along the padded dims: the same at every position
        if a not in padded:
            padded[a] = add(aten.constant_pad_nd.default, (a, widths, 0))
        return padded[a]

    with graph.inserting_before(pad):
        for node in chain:
            args = torch.fx.node.map_aggregate(node.args, operand)
            kwargs = torch.fx.node.map_aggregate(dict(node.kwargs), operand)
            new[node] = add(node.target, args, kwargs, like=node)
        # the unpadded positions: ones of the padded dims' shape, padded with zeros (input-free,
        # so computed once at compile time)
        lead = min(padded_dims)
        ones = add(
            aten.full.default,
            ([1] * lead + list(full[lead:]), True),
            {"dtype": torch.bool, "device": out.device},
        )
        inside = add(aten.constant_pad_nd.default, (ones, widths, False))
        border = add(aten.scalar_tensor.default, (fill,), {"dtype": out.dtype, "device": out.device})
        result = add(aten.where.self, (inside, new[src], border))
    got = result.meta["val"]
    leaves_graph = any(u.op == "output" for u in pad.users)
    if (
        tuple(got.shape) != tuple(out.shape)
        or got.dtype != out.dtype
        or (leaves_graph and got.stride() != out.stride())  # the caller sees its strides
    ):
        for n in reversed(made):
            graph.erase_node(n)
        return 0
    pad.replace_all_uses_with(result)
    graph.erase_node(pad)
    for node in reversed(chain):
        if not node.users:
            graph.erase_node(node)
    return 1
