"""Which storage an FX node's value lives in: through views, getitems and the ops that may hand
their input back. Graph facts, read by the layout pass (which weight copies a compiled graph can
keep) and by the backend (buffer reuse, in-place stores, duplicate merging)."""

from __future__ import annotations

import operator

import torch
import torch.fx

from fuselint.graph.op_facts import SILENT_ALIASES


def is_view(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and node.target.is_view
    )


def storage_of(n: torch.fx.Node) -> torch.fx.Node:
    """The node whose storage `n` reads: through views and getitems to their base."""
    while n.op == "call_function" and (n.target is operator.getitem or is_view(n)) and n.all_input_nodes:
        n = n.all_input_nodes[0]
    return n


def written_storages(nodes) -> set[torch.fx.Node]:
    """The storages (as `storage_of` names them) that some op among `nodes` writes in place."""
    written: set[torch.fx.Node] = set()
    for n in nodes:
        if not isinstance(n.target, torch._ops.OpOverload) or not n.target._schema.is_mutable:
            continue
        for arg, value in zip(n.target._schema.arguments, n.args, strict=False):
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.fx.Node):
                written.add(storage_of(value))
        for value in n.kwargs.values():
            if isinstance(value, torch.fx.Node):  # out= and the like: written, or not worth telling
                written.add(storage_of(value))
    return written


def view_base(n: torch.fx.Node) -> torch.fx.Node | None:
    """The tensor node a view node views: a view op's first argument, or for an item of a
    view op that returns several (split, unbind), that op's first argument."""
    if n.op != "call_function":
        return None
    target, args = n.target, n.args
    if target is operator.getitem and isinstance(args[0], torch.fx.Node) and args[0].op == "call_function":
        target, args = args[0].target, args[0].args
    if not isinstance(target, torch._ops.OpOverload) or not target.is_view or not args:
        return None
    return args[0] if isinstance(args[0], torch.fx.Node) else None


def aliases_input(n: torch.fx.Node) -> torch.fx.Node | None:
    """The input whose storage `n`'s value may share: the base of a view, the first tensor
    argument of an op that can hand its input back; None for a value in new storage."""
    base = view_base(n)
    if base is not None:
        return base
    if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
        if (
            n.target.overloadpacket.__name__ in SILENT_ALIASES
            and n.args
            and isinstance(n.args[0], torch.fx.Node)
        ):
            return n.args[0]
    return None


def storage_root(n: torch.fx.Node) -> torch.fx.Node:
    """The value whose storage `n` shares (itself when it has its own)."""
    while (a := aliases_input(n)) is not None:
        n = a
    return n
