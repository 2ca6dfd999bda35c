"""Compute once, at compile time, what a graph computes from no input at all.

AOTAutograd's graphs rebuild their constants on every call: position ids
(``prims.iota``, whose eager form is a Python function calling ``torch.arange``), the
``full`` and ``scalar_tensor`` of attention masks, and the kernels fed only by those. Each
costs host time per call (a Python prim is tens of µs) for a value that never changes.
:func:`fold_constants` runs such nodes once and stores their values on the module as
buffers, read through ``get_attr``. Folded values never leave the graph as outputs (the
caller would get the same tensor back on every call) and never feed an op that writes
to its arguments; random ops and anything larger than ``max_bytes`` stay per call.
"""

from __future__ import annotations

import operator

import torch
import torch.fx

from fuselint.backend.runtime import FusedKernel, keeps_effects

# Bigger constants stay per call: one launch costs less than pinning that much memory.
MAX_BYTES = 1 << 20


def pure(node: torch.fx.Node) -> bool:
    """An op whose value depends only on its arguments and that writes to none of them."""
    target = node.target
    if isinstance(target, FusedKernel) or target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return torch.Tag.nondeterministic_bitwise not in target.tags


def _small(node: torch.fx.Node, max_bytes: int) -> bool:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.numel() * val.element_size() <= max_bytes
    if isinstance(node.target, FusedKernel):  # a kernel computes all its outputs or none
        return all(
            torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size() <= max_bytes
            for shape, _stride, dtype in node.target.out_specs
        )
    return False


def constant_nodes(gm: torch.fx.GraphModule, max_bytes: int = MAX_BYTES) -> list[torch.fx.Node]:
    """The call nodes of `gm` whose value depends on no placeholder, in graph order."""
    constant: list[torch.fx.Node] = []
    known: set[torch.fx.Node] = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or not pure(n) or not _small(n, max_bytes):
            continue
        if all(a in known for a in n.all_input_nodes):
            known.add(n)
            constant.append(n)
    return constant


def _frontier(constant: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """The constant nodes whose values something per-call reads: those to store."""
    inside = set(constant)
    stored = []
    for n in constant:
        users = set(n.users)
        if any(u.op == "output" for u in users) or not isinstance(n.meta.get("val"), torch.Tensor):
            continue
        if users - inside:
            stored.append(n)
    return stored


def fold_constants(gm: torch.fx.GraphModule, max_bytes: int = MAX_BYTES) -> list[str]:
    """Replace the input-free nodes of `gm` by buffers computed now; the names of those folded.

    Runs the nodes for real (outside any fake mode), so call it where the graph's device is."""
    constant = constant_nodes(gm, max_bytes)
    stored = [n for n in _frontier(constant) if not any(u.op == "output" for u in n.users)]
    if not stored:
        return []
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    values: dict[torch.fx.Node, object] = {}
    with unset_fake_temporarily(), torch.no_grad():
        for n in constant:
            args = torch.fx.map_arg(n.args, values.__getitem__)
            kwargs = torch.fx.map_arg(n.kwargs, values.__getitem__)
            values[n] = n.target(*args, **kwargs)
    folded = []
    for k, n in enumerate(stored):
        name = f"_fuselint_constant{k}"
        gm.register_buffer(name, values[n], persistent=False)
        with gm.graph.inserting_before(n):
            attr = gm.graph.get_attr(name)
        attr.meta = dict(n.meta)
        n.replace_all_uses_with(attr)
        folded.append(n.name)
    gm.graph.eliminate_dead_code(is_impure_node=keeps_effects)
    gm.recompile()
    return folded
