"""What a graph break costs in fusion: the kernels that could fuse across it.

A break splits one frame into two captured graphs; the values that live across it leave the
first graph and enter the second (Capture.links). Planned as one graph, the second graph's ops
that read those values could fuse with the first graph's ops that write them. Fixing the
break saves the planned cost of the two graphs apart minus that of the two merged, per call.

The estimate is conservative: the merged graph still writes every value the first graph
returned, since the Python code at the break may read it (a print, an `.item()`), and the host
sync or the re-entry into compiled code that a break costs is not counted. Training captures
are not priced (their forward graphs also return what backward saves).
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.findings import Gain
from fuselint.fusion.cost import graph_cost
from fuselint.fusion.devices import DEFAULT, Device
from fuselint.fusion.plan import FusionPlan, plan
from fuselint.graph.capture import Capture, GraphBreak, GraphLink
from fuselint.graph.fusion_graph import FusionGraph


def break_gains(
    capture: Capture, plans: list[FusionPlan], device: Device = DEFAULT
) -> tuple[Gain | None, ...]:
    """The fusion saving of fixing each of capture.breaks (None where it cannot be priced)."""
    if capture.train:
        return tuple(None for _ in capture.breaks)
    by_name = {p.graph.name: p for p in plans}
    return tuple(_gain(brk, capture.links, by_name, device) for brk in capture.breaks)


def resuming_graph(after: str, links: tuple[GraphLink, ...], order: list[str]) -> str | None:
    """The graph that resumes after a break that ends graph `after`: the one that takes most of
    the values crossing it, and of those the first to run (`order` is capture order), which is
    the one dynamo compiled right after the break. None when nothing crosses it."""
    counts: dict[str, int] = {}
    for link in links:
        if link.source == after and link.target != after and link.target in order:
            counts[link.target] = counts.get(link.target, 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda t: (-counts[t], order.index(t)))


def _gain(
    brk: GraphBreak, links: tuple[GraphLink, ...], plans: dict[str, FusionPlan], device: Device
) -> Gain | None:
    first = plans.get(brk.after_graph)
    target = resuming_graph(brk.after_graph, links, list(plans))
    if first is None or target is None:
        return None
    second = plans[target]
    crossing = [link for link in links if link.source == brk.after_graph and link.target == target]
    both = merged(first.graph, second.graph, crossing)
    if both is None:
        return None
    calls = min(first.graph.calls, second.graph.calls)
    apart = graph_cost(first, device).fused + graph_cost(second, device).fused
    saved = (apart - graph_cost(plan(both), device).fused).scaled(calls)
    return Gain(
        launches=max(saved.launches, 0.0),
        bytes=max(saved.bytes, 0.0),
        time_us=max(saved.time_us, 0.0),
        device=device.name,
    )


def merged(first: FusionGraph, second: FusionGraph, links: list[GraphLink]) -> FusionGraph | None:
    """One graph computing `first` then `second`, second reading the linked values straight from
    first's ops; every output of both stays an output. None when the two do not join cleanly."""
    gm_a, gm_b = first.gm, second.gm
    constants = _constants(gm_a, gm_b)
    if constants is None:
        return None
    graph = torch.fx.Graph()
    inputs_b = [n for n in gm_b.graph.nodes if n.op == "placeholder"]
    linked = {link.input for link in links}
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for i, node in enumerate(inputs_b):
        if i not in linked:  # second's own inputs, renamed apart from first's
            env[node] = graph.placeholder(f"{node.target}_after_break")
            env[node].meta = dict(node.meta)
    outs_a = _as_list(graph.graph_copy(gm_a.graph, {}))
    for link in links:
        if link.output >= len(outs_a) or link.input >= len(inputs_b):
            return None
        value, placeholder = outs_a[link.output], inputs_b[link.input]
        if not _same_tensor_type(value, placeholder):
            return None
        env[placeholder] = value
    outs_b = _as_list(graph.graph_copy(gm_b.graph, env))
    graph.output((*outs_a, *outs_b))
    return FusionGraph.from_fx(
        torch.fx.GraphModule(constants, graph),
        name=f"{first.name}+{second.name}",
        calls=min(first.calls, second.calls),
    )


def _constants(*modules: torch.fx.GraphModule) -> dict[str, object] | None:
    """The attributes the graphs' get_attr nodes read, or None when two share a name."""
    found: dict[str, object] = {}
    for gm in modules:
        for node in gm.graph.nodes:
            if node.op != "get_attr":
                continue
            value = getattr(gm, node.target)
            if found.setdefault(node.target, value) is not value:
                return None
    return found


def _as_list(values: object) -> list:
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _same_tensor_type(value: object, placeholder: torch.fx.Node) -> bool:
    a = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    b = placeholder.meta.get("val")
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.shape == b.shape
        and a.dtype == b.dtype
    )
