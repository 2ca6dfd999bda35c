"""Which nodes share a kernel: the fusion planner's groups, else a small greedy stand-in.

The backend takes its groups from ``fuselint.fusion.plan`` (the same plan `check` prices).
While that module is absent, :func:`greedy_groups` forms groups the same legal way: a
fusible node joins the group of one of its producers unless another of its inputs already
depends on that group through a node outside it (which would make a cycle).
"""

from __future__ import annotations

from fuselint.graph.fusion_graph import FusionGraph

FUSIBLE_KINDS = frozenset({"pointwise", "reduction", "view", "injective"})
MAX_NODES = 64
# Planner group kinds the codegen attempts; matmul, conv and other stay ATen ops.
GENERATED_KINDS = frozenset({"pointwise", "reduction", "injective"})


def greedy_groups(fg: FusionGraph) -> list[tuple[str, ...]]:
    """Legal groups of fusible nodes, each in topological order."""
    order = {name: i for i, name in enumerate(fg.ops())}
    member: dict[str, int] = {}
    groups: list[list[str]] = []
    # desc[g]: nodes outside g that depend on g; joining g through one of them is a cycle.
    desc: list[set[str]] = []
    for name in fg.ops():
        data = fg.dag.nodes[name]
        preds = sorted(fg.dag.predecessors(name), key=order.__getitem__)
        chosen = None
        if data["kind"] in FUSIBLE_KINDS and data["fx"].op == "call_function":
            for p in reversed(preds):
                g = member.get(p)
                if g is None or len(groups[g]) >= MAX_NODES:
                    continue
                if any(q in desc[g] for q in preds):
                    continue
                chosen = g
                break
            # No producer's group will do: share the latest group (horizontal fusion over common
            # inputs) when that is legal; the codegen splits it again if the shapes disagree.
            if chosen is None and groups and len(groups[-1]) < MAX_NODES:
                if not any(q in desc[-1] for q in preds):
                    chosen = len(groups) - 1
            if chosen is None:
                groups.append([])
                desc.append(set())
                chosen = len(groups) - 1
            groups[chosen].append(name)
            member[name] = chosen
        for g, d in enumerate(desc):
            if g != chosen and any(member.get(p) == g or p in d for p in preds):
                d.add(name)
    return [tuple(g) for g in groups]


def planner_groups(fg: FusionGraph) -> list[tuple[str, ...]]:
    """Node groups to turn into kernels: the planner's when it is installed."""
    try:
        from fuselint.fusion.plan import plan
    except ImportError:
        return greedy_groups(fg)
    return [tuple(g.nodes) for g in plan(fg).groups if g.kind in GENERATED_KINDS]
