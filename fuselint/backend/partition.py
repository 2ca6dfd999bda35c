"""Which nodes share a kernel: the fusion planner's groups, the very plan `check` prices."""

from __future__ import annotations

from fuselint.fusion.plan import plan
from fuselint.graph.fusion_graph import FusionGraph

# Planner group kinds the codegen attempts; matmul, conv and other stay ATen ops.
GENERATED_KINDS = frozenset({"pointwise", "reduction", "injective"})


def planner_groups(fg: FusionGraph) -> list[tuple[str, ...]]:
    """Node groups to turn into kernels, in the plan's order."""
    return [tuple(g.nodes) for g in plan(fg).groups if g.kind in GENERATED_KINDS]
