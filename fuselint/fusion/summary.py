"""The plan as JSON for the `graph` command: totals, one row per kernel, and node colours."""

from __future__ import annotations

from fuselint.fusion.cost import graph_cost
from fuselint.fusion.devices import DEFAULT, Device
from fuselint.fusion.plan import FusionPlan


def plan_summary(plan: FusionPlan, device: Device = DEFAULT) -> dict:
    """{device, eager, fused, saving, speedup, groups, materialized, recomputed, node_group}.

    eager/fused hold launches, bytes and time_us per run of the graph; node_group maps every
    node that some kernel computes (views used inside included) to the id of its group, for
    colouring the graph; a node recomputed in several groups maps to the first.
    """
    cost = graph_cost(plan, device)
    by_id = {gc.group: gc for gc in cost.groups}

    def totals(c) -> dict:
        return {"launches": c.launches, "bytes": c.bytes, "time_us": round(c.time_us, 3)}

    groups = []
    for g in plan.groups:
        gc = by_id[g.id]
        groups.append(
            {
                "id": g.id,
                "kind": g.kind,
                "nodes": list(g.nodes),
                "inputs": list(g.inputs),
                "outputs": list(g.outputs),
                "recomputed": list(g.recomputed),
                "roles": dict(g.roles),
                "shape": list(g.shape),
                "reduce_dims": list(g.reduce_dims),
                "space": list(g.space),
                "launches": g.launches,
                "eager": totals(gc.eager),
                "fused": totals(gc.fused),
            }
        )
    return {
        "graph": plan.graph.name,
        "calls": plan.graph.calls,
        "device": device.name,
        "eager": totals(cost.eager),
        "fused": totals(cost.fused),
        "saving": totals(cost.saving),
        "speedup": round(cost.speedup, 3),
        "fusible_speedup": round(cost.fusible_speedup, 3),
        "groups": groups,
        "materialized": [
            {"node": m.node, "groups": list(m.groups), "bytes": m.bytes, "reason": m.reason}
            for m in plan.materialized
        ],
        "recomputed": [
            {"node": r.node, "groups": list(r.groups), "reason": r.reason} for r in plan.recomputations
        ],
        "node_group": plan.group_of(),
    }
