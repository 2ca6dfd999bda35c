"""Compute once what a graph computes twice.

AOTAutograd's graphs repeat work that the model's source repeats: Hugging Face's LLaMA builds
its causal mask (``iota``, ``le``, ``where``) once per attention layer, each a full-size
tensor written on every call. :func:`merge_duplicates` keeps the first of each set of nodes
that apply the same pure op to equal arguments (the same nodes, or nodes that compute the
same values) and points the others' readers at it. Index vectors (``arange(n)`` and what is
computed from it alone) are left as they are: kernels compute them from their index anyway.

A node stays as it is where sharing could be seen: its value (or a view of it) is a graph
output, since the caller would get two names for one tensor; or something writes to it.
Ops whose value is not a function of their arguments (random ops, ``empty``) never merge.
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.constants import pure
from fuselint.backend.runtime import keeps_effects
from fuselint.graph.aliasing import storage_of, written_storages


def _key(value: object, node_key=None) -> object:
    """`value` as a hashable key that tells apart what compares equal but computes apart:
    ``1``, ``1.0`` and ``True``; ``0.0`` and ``-0.0``. Nodes go through `node_key`."""
    if isinstance(value, torch.fx.Node):
        return node_key(value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v, node_key) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _key(v, node_key)) for k, v in sorted(value.items())))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (bool, int, str, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(value).__name__, str(value))
    raise TypeError(type(value).__name__)  # anything else: not merged


def _index_vector(n: torch.fx.Node, input_free: set[torch.fx.Node]) -> bool:
    """A value computed from no input with at most one dim longer than 1 (``arange(n)``,
    ``arange(n) + 1``): every kernel that reads it computes it from its index for free, and
    one node read both as rows and as columns (``pos[:, None] - pos[None, :]``) would need
    two dims of one kernel."""
    val = n.meta.get("val")
    return n in input_free and isinstance(val, torch.Tensor) and sum(s > 1 for s in val.shape) <= 1


def merge_duplicates(gm: torch.fx.GraphModule) -> int:
    """Merge the nodes of `gm` that repeat an earlier node's pure op on equal arguments (the
    same nodes, or nodes that compute the same values); the number merged."""
    # what a write changes reads differently before and after it (make_fx keeps `y.view(..).add_(1)`
    # and later reads of `y`): such reads are never numbered, so neither they nor their readers merge
    written = written_storages(gm.graph.nodes)
    # a storage the caller receives or something writes is never shared
    held = written | {storage_of(a) for n in gm.graph.nodes if n.op == "output" for a in n.all_input_nodes}
    # A pure node's value, as the number of what computes it: its op and its arguments, whose
    # nodes are numbers too, so that a key stays as short as the node's own arguments.
    value_of: dict[torch.fx.Node, int] = {}
    numbers: dict[object, int] = {}
    input_free: set[torch.fx.Node] = set()
    first: dict[int, torch.fx.Node] = {}
    merged = 0

    def node_key(value: torch.fx.Node) -> object:
        return ("value", value_of[value]) if value in value_of else ("node", value)

    for n in list(gm.graph.nodes):
        if n.op != "call_function" or not pure(n) or "empty" in str(n.target):
            continue
        if any(storage_of(a) in written for a in n.all_input_nodes):
            continue
        if all(a in input_free for a in n.all_input_nodes):
            input_free.add(n)
        try:
            key = (n.target, _key(n.args, node_key), _key(n.kwargs, node_key))
        except TypeError:
            continue
        value = value_of[n] = numbers.setdefault(key, len(numbers))
        if storage_of(n) in held or _index_vector(n, input_free):
            continue
        kept = first.setdefault(value, n)
        if kept is not n:
            n.replace_all_uses_with(kept)
            gm.graph.erase_node(n)
            merged += 1
    if merged:
        # what only the merged nodes read; `_assert_async` reads and is read by none, but stays
        for n in list(reversed(gm.graph.nodes)):
            if n.op == "call_function" and not n.users and pure(n) and not keeps_effects(n):
                gm.graph.erase_node(n)
        gm.recompile()
    return merged
