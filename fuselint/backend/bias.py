"""A float32 matmul's bias added by the kernels that read its result, not by cuBLAS.

``addmm(bias, x, w)`` asks cuBLAS for ``x @ w + bias`` in one GEMM. In float32 the bias changes
which kernel cuBLAS picks: on an H100, BERT's (4096, 768) x (768, 768) projections ran a 64x64-tile
kernel as addmm (135.6 µs alone) and a 128x128 one as mm (132.1 µs); the whole model's GPU time
was 6580 µs against Inductor's 6201 (``bench/kernel_list.py bert --dtype float32``). Inductor's
post-grad pass (``unfuse_bias_add_to_pointwise``) writes such an addmm as ``mm`` plus an add wherever
every reader of the result is pointwise, through views; it keeps bf16 and fp16 addmms whole
(``keep_addmm_fused_for_half_dtypes``: a 16-bit mm result would round once more before the add).

:func:`unfuse_addmm_bias` does the same for the same cases, and puts the add where the readers
are: real models view the result before reading it (BERT's ``(4096, 768)`` is viewed as
``(16, 256, 768)`` and split into heads), and the planner fuses a pointwise producer into its
reader only at the reader's shape. So each view the result goes through is applied to ``mm`` and
to the bias expanded to ``(M, N)`` alike (views of a graph input, which the lowering folds into
the kernel's indexing), and each pointwise reader reads ``V(mm) + V(bias)``: the same values; each reader's
result keeps its layout (checked on the fake values, else the addmm stays whole).
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.ops import HALF
from fuselint.backend.runtime import can_generate_for
from fuselint.graph.layout import fake_value, rewrite_each, same_layout, value_with

aten = torch.ops.aten


# Views that mean the same applied to a stride-0 (expanded) tensor as to a dense one.
VIEWS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.slice.Tensor,
    aten.select.int,
    aten.expand.default,
}


def _pointwise(n: torch.fx.Node) -> bool:
    return (
        n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and torch.Tag.pointwise in n.target.tags
    )


def _view_tree(n: torch.fx.Node, views: list, readers: list) -> bool:
    """Collect the views of `n` (in graph order of discovery) and the pointwise nodes reading
    `n` or one of them; False when anything else reads them (Inductor's condition)."""
    for u in n.users:
        if u.op == "call_function" and u.target in VIEWS and u.args[0] is n:
            views.append(u)
            if not _view_tree(u, views, readers):
                return False
        elif _pointwise(u):
            readers.append((u, n))
        else:
            return False
    return True


def _candidate(n: torch.fx.Node) -> tuple[list, list] | None:
    if n.op != "call_function" or n.target is not aten.addmm.default or n.kwargs or len(n.args) != 3:
        return None
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype in HALF or not val.dtype.is_floating_point:
        return None
    if not can_generate_for(val.device) or val.dim() != 2 or not n.users:
        return None
    views: list = []
    readers: list = []
    if not _view_tree(n, views, readers) or not readers:
        return None
    return views, readers


def _rewrite(graph: torch.fx.Graph, addmm: torch.fx.Node, views: list, readers: list) -> bool:
    """Replace `addmm` (module docstring); False, with the graph unchanged, when some reader
    would see another layout."""
    bias, x, w = addmm.args
    made: list[torch.fx.Node] = []

    def new(target: object, args: tuple, like: torch.fx.Node) -> torch.fx.Node:
        node = graph.call_function(target, args)
        node.meta = dict(like.meta)
        made.append(node)
        node.meta["val"] = fake_value(node)
        return node

    sums: dict[torch.fx.Node, torch.fx.Node] = {}
    try:
        with graph.inserting_before(addmm):
            mm = new(aten.mm.default, (x, w), addmm)
            wide = new(aten.expand.default, (bias, list(addmm.meta["val"].shape)), addmm)
        twins = {addmm: (mm, wide)}
        for v in views:
            m, b = twins[v.args[0]]
            with graph.inserting_before(v):
                twins[v] = (new(v.target, (m, *v.args[1:]), v), new(v.target, (b, *v.args[1:]), v))
        for reader, source in readers:
            if source not in sums:
                m, b = twins[source]
                with graph.inserting_after(b):
                    sums[source] = new(aten.add.Tensor, (b, m), source)
            if not _same_result(reader, source, sums[source]):
                raise ValueError("another layout")
    except Exception:  # a view the expanded bias cannot take, or another layout: keep the addmm
        for node in reversed(made):
            graph.erase_node(node)
        return False
    for reader, source in readers:
        reader.replace_input_with(source, sums[source])
    for node in [*reversed(views), addmm]:
        if not node.users:
            graph.erase_node(node)
    return True


def _same_result(reader: torch.fx.Node, source: torch.fx.Node, replacement: torch.fx.Node) -> bool:
    """Whether `reader` gives a value of the same shape, dtype and strides reading `replacement`
    where it read `source` (a pointwise op lays its result out after its inputs' strides)."""
    return same_layout(value_with(reader, {source: replacement.meta["val"]}), reader.meta.get("val"))


def unfuse_addmm_bias(gm: torch.fx.GraphModule) -> int:
    """Rewrite each float32 ``addmm(bias, x, w)`` whose readers are all pointwise (through views)
    as ``mm(x, w)`` plus the bias, added at each reader (module docstring); how many."""
    found = [(n, *c) for n in gm.graph.nodes if (c := _candidate(n)) is not None]
    return rewrite_each(gm, found, lambda graph, item: _rewrite(graph, *item))
