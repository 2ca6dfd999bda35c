"""A tensor repeated along a dim, written as the concatenation it is, so readers recompute it.

``torch.cat((freqs, freqs), -1)`` (the rotary table of LLaMA-style models) reaches the backend
decomposed as a repeat: insert a size-1 dim, expand it to ``r``, copy, merge the two dims:

    view(clone(expand(unsqueeze(x, k), [..., r, n, ...])), [..., r * n, ...])

Element ``m`` of the merged dim is ``x[..., m % n, ...]``. The lowering maps each dim of a
value onto one kernel dim and cannot express ``m % n``, so a group that recomputes the table
(the rope kernels, which read cos and sin of it) did not lower whole and split: the copy and
the cos/sin became kernels of their own, two launches Inductor does not make (its index
algebra has ModularIndexing). :func:`repeats_as_cats` rewrites the pattern, before planning, as

    cat([x, x, ..., x], k)        (r pieces, r <= MAX_PIECES)

the same values in the same (contiguous) layout; a cat of few pieces read only by pointwise ops
is recomputed by its readers as Inductor's GPU lowering does (fuselint.fusion.plan).
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.lowering import static_shape
from fuselint.backend.runtime import keeps_effects
from fuselint.fusion.plan import PlanOptions
from fuselint.graph.layout import fake_value, graph_fake_mode

aten = torch.ops.aten

# a longer cat the plan stores rather than recomputes: leave such a repeat as it is
MAX_PIECES = PlanOptions.recompute_max_cat_inputs

_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _repeat_of(view: torch.fx.Node) -> tuple[torch.fx.Node, int, int] | None:
    """(x, k, r) when `view` is view(clone(expand(x', shape))) with x' = x plus a size-1 dim
    at k expanded to r, and the view merging dims k and k + 1 of the copy; else None."""
    clone = view.args[0]
    if not isinstance(clone, torch.fx.Node) or clone.target is not aten.clone.default:
        return None
    if clone.kwargs.get("memory_format", torch.contiguous_format) is not torch.contiguous_format:
        return None
    if len(clone.users) != 1:
        return None
    expand = clone.args[0]
    if not isinstance(expand, torch.fx.Node) or expand.target is not aten.expand.default:
        return None
    src = expand.args[0]
    before, after, merged = (
        static_shape(n) if isinstance(n, torch.fx.Node) else None for n in (src, expand, view)
    )
    if before is None or after is None or merged is None or len(before) != len(after):
        return None
    grown = [d for d in range(len(after)) if before[d] != after[d]]
    if len(grown) != 1:
        return None
    k = grown[0]
    r = after[k]
    if before[k] != 1 or not 2 <= r <= MAX_PIECES or k + 1 >= len(after):
        return None
    if merged != (*after[:k], r * after[k + 1], *after[k + 2 :]):
        return None
    return src, k, r


def repeats_as_cats(gm: torch.fx.GraphModule) -> int:
    """Rewrite each repeat-as-copy of `gm` into a cat of its pieces (module docstring); how many."""
    graph = gm.graph
    views = [n for n in graph.nodes if n.op == "call_function" and n.target in _VIEWS]
    found = [(v, m) for v in views if (m := _repeat_of(v)) is not None]
    if not found:
        return 0
    mode = graph_fake_mode(graph)
    if mode is None:
        return 0
    rewritten = 0
    with mode:
        for view, (src, k, r) in found:
            with graph.inserting_before(view):
                piece = graph.call_function(aten.squeeze.dim, (src, k))
                piece.meta = dict(src.meta)
                piece.meta["val"] = fake_value(piece)
                cat = graph.call_function(aten.cat.default, ([piece] * r, k))
                cat.meta = dict(view.meta)
                cat.meta["val"] = fake_value(cat)
            if tuple(cat.meta["val"].stride()) != tuple(view.meta["val"].stride()):
                graph.erase_node(cat)
                graph.erase_node(piece)
                continue
            view.replace_all_uses_with(cat)
            rewritten += 1
    if rewritten:
        graph.eliminate_dead_code(is_impure_node=keeps_effects)
        gm.recompile()
    return rewritten
