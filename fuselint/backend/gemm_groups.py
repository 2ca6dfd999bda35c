"""Small GEMMs of one input, run as one GEMM over their weights joined.

Attention projects the same hidden states three times, ``q = x @ Wq.T``, ``k = x @ Wk.T``,
``v = x @ Wv.T`` (Hugging Face's LLaMA, BERT, T5). At the suite's sizes each GEMM is small:
a (4096, 1024) x (1024, 1024) product is 128 of cuBLAS's 256x128 tiles, less than one wave on
the 132 SMs of an H100 or H200, so the three run at a fraction of the tensor cores' rate.
One GEMM over the weights joined along N computes the same dot products, each over the same K
in the same kernel family; on an H200 (`.scratch/mm_group.py`, bench/results/h200-s11/) it is
bit-equal to the three and takes 41.8 µs against 50.2 (LLaMA), 28.6 against 37.7 (BERT's
addmm), 16.6 against 26.3 (T5). LLaMA's gate and up projections (352 tiles each, more than two
waves) gain nothing (72.4 against 71.0 µs), so only GEMMs whose result fits in one wave of
the largest tiles are joined.

:func:`join_small_gemms` rewrites, in an inference graph, each set of ``mm(x, Wi.T)`` (or each
set of ``addmm(bi, x, Wi.T)``) whose weights (and biases) are parameters into

    w = JoinedWeights(W1, W2, W3)            # cat along dim 0, made once and kept
    y = mm(x, w.T)
    y1, y2, y3 = y[:, :n1], y[:, n1:n1 + n2], ...   # views; the readers' kernels index them

where every reader of each result keeps its layout through those views (else that set is left
alone). A :class:`JoinedWeights` remakes its tensor, in place, when a weight's storage or
version changes (``load_state_dict`` copies into the parameters): the check costs a few
attribute reads per call, and a CUDA-graph replay, which runs no Python, calls
:meth:`JoinedWeights.refresh` first. The joined copy holds the weights' memory twice, so a graph
joins at most ``MAX_JOINED_BYTES`` of them.
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.kept_layouts import KeptValue
from fuselint.backend.ops import HALF
from fuselint.backend.patchify import views_reading
from fuselint.graph.aliasing import written_storages
from fuselint.graph.layout import NewNodes, rewrite_each

aten = torch.ops.aten

# One wave of cuBLAS's largest bf16 tiles (256 x 128) on the 132 SMs of an H100/H200: a GEMM
# whose result is larger fills the GPU on its own.
MAX_JOINED_RESULT = 132 * 256 * 128
# The most weight memory a graph holds a second copy of.
MAX_JOINED_BYTES = 64 << 20


class JoinedWeights(KeptValue):
    """``torch.cat(weights, 0)`` of the weights at graph-input `positions`, kept
    (:class:`fuselint.backend.kept_layouts.KeptValue`)."""

    def __init__(self, positions: tuple[int, ...]) -> None:
        super().__init__(positions, "joined_weights")

    def _make(self, weights: tuple, out: torch.Tensor | None) -> torch.Tensor:
        return torch.cat(weights, 0, out=out)


def joined_weights(gm: torch.fx.GraphModule) -> list[JoinedWeights]:
    return [
        n.target for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, JoinedWeights)
    ]


def _weight(node: object, params: dict) -> torch.fx.Node | None:
    """The parameter W of ``W.T`` (``t`` or ``permute [1, 0]``), else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    transposed = node.target is aten.t.default or (
        node.target is aten.permute.default and list(node.args[1]) == [1, 0]
    )
    w = node.args[0] if transposed else None
    return w if w in params else None


def _member(n: torch.fx.Node, params: dict) -> tuple | None:
    """(kind, x, weight, bias) of a small ``mm(x, W.T)`` / ``addmm(b, x, W.T)`` on parameters."""
    if n.op != "call_function" or n.kwargs:
        return None
    if n.target is aten.mm.default and len(n.args) == 2:
        bias, (x, wt) = None, n.args
    elif n.target is aten.addmm.default and len(n.args) == 3:
        bias, x, wt = n.args
        if bias not in params or params[bias].dim() != 1:
            return None
    else:
        return None
    w = _weight(wt, params)
    val = n.meta.get("val")
    if w is None or not isinstance(val, torch.Tensor) or val.numel() > MAX_JOINED_RESULT:
        return None
    # joined only where it was measured to gain: 16-bit tensor-core GEMMs; a float32 GEMM (no
    # TF32) runs in smaller tiles, so the same shapes already fill the GPU (bench/gemm_join.py)
    if params[w].dim() != 2 or params[w].dtype not in HALF:
        return None
    if bias is not None and params[bias].dtype != params[w].dtype:
        return None
    return ("addmm" if bias is not None else "mm", x, w, bias)


def _groups(gm: torch.fx.GraphModule, params: dict) -> list[list[tuple[torch.fx.Node, tuple]]]:
    by_input: dict[tuple, list] = {}
    for n in gm.graph.nodes:
        m = _member(n, params)
        if m is not None:
            kind, x, w, _ = m
            by_input.setdefault((kind, x, params[w].dtype), []).append((n, m))
    return [g for g in by_input.values() if len(g) >= 2]


def join_small_gemms(gm: torch.fx.GraphModule, static: frozenset[int]) -> int:
    """Join each set of small GEMMs of one input over parameter weights (module docstring);
    how many GEMMs were joined away. `static`: positions of the graph inputs that are
    parameters or buffers."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = written_storages(gm.graph.nodes)  # a buffer the graph updates is read as it is then
    params = {
        p: p.meta["val"]
        for i, p in enumerate(placeholders)
        if i in static and isinstance(p.meta.get("val"), torch.Tensor) and p not in written
    }
    position = {p: i for i, p in enumerate(placeholders)}
    budget = [MAX_JOINED_BYTES]

    def rewrite(graph: torch.fx.Graph, group: list) -> int:
        return _join(graph, group, params, position, budget)

    return rewrite_each(gm, _groups(gm, params), rewrite)


def _join(graph: torch.fx.Graph, group: list, params: dict, position: dict, budget: list) -> int:
    weights = [m[2] for _, m in group]
    biases = [m[3] for _, m in group]
    nbytes = sum(params[w].numel() * params[w].element_size() for w in weights)
    if nbytes > budget[0]:
        return 0
    nodes = [n for n, _ in group]
    first = nodes[0]  # `_groups` lists a group's GEMMs in graph order
    x = group[0][1][1]
    new = NewNodes(graph, first)

    def joined(parts: list[torch.fx.Node]) -> torch.fx.Node:
        kept = JoinedWeights(tuple(position[p] for p in parts))
        return new.add(kept, tuple(parts), val=aten.cat.default([params[p] for p in parts], 0))

    try:
        with graph.inserting_before(first):
            wt = new(aten.permute.default, joined(weights), [1, 0])
            if biases[0] is None:
                out = new(aten.mm.default, x, wt)
            else:
                out = new(aten.addmm.default, joined(biases), x, wt)
            slices = []
            start = 0
            for n in nodes:
                width = n.meta["val"].shape[1]
                slices.append(new(aten.slice.Tensor, out, 1, start, start + width))
                start += width
        plans = [views_reading(n, s) for n, s in zip(nodes, slices, strict=True)]
        if any(p is None for p in plans):
            raise ValueError("a reader's layout would change")
    except Exception:  # a view the joined result cannot take, or another layout: keep the GEMMs
        new.undo()
        return 0
    for n, s, views in zip(nodes, slices, plans, strict=True):
        n.replace_all_uses_with(s)
        graph.erase_node(n)
        for view, val in views.items():
            view.meta["val"] = val
    budget[0] -= nbytes
    return len(nodes) - 1
