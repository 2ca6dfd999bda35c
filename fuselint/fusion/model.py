"""A traced model read through the planner: its plans, its cost, and what the plan shows.

One capture (every graph dynamo built for an entry, with the breaks between them) becomes
one ModelAnalysis: a FusionPlan per graph, the model's eager and fused cost weighted by how
often each graph runs, the FL301 findings the plans reveal, what fixing each graph break would
save, and the summary row that the Markdown report and `fuselint graph` print.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuselint.findings import Finding, Gain
from fuselint.fusion.breaks import break_gains
from fuselint.fusion.composites import composite_findings
from fuselint.fusion.cost import ModelCost, model_cost
from fuselint.fusion.devices import DEFAULT, Device
from fuselint.fusion.model_summary import ModelSummary, Totals
from fuselint.fusion.plan import FusionPlan, plan
from fuselint.fusion.plan_findings import attention_findings, materialized_findings
from fuselint.fusion.summary import plan_summary
from fuselint.graph.capture import Capture


@dataclass(frozen=True)
class ModelAnalysis:
    capture: Capture
    plans: tuple[FusionPlan, ...]
    cost: ModelCost
    findings: tuple[Finding, ...]
    # what fixing each of capture.breaks would save in fusion (fuselint.fusion.breaks)
    break_gains: tuple[Gain | None, ...] = ()

    def summary(self) -> ModelSummary:
        """The row the Markdown report's model table and `fuselint graph` read."""

        def totals(c) -> Totals:
            return Totals(launches=c.launches, bytes=c.bytes, time_us=round(c.time_us, 3))

        return ModelSummary(
            model=self.capture.entry,
            device=self.cost.device,
            graphs=len(self.plans),
            breaks=len(self.capture.breaks),
            eager=totals(self.cost.eager),
            fused=totals(self.cost.fused),
            speedup=round(self.cost.speedup, 3),
            fusible_speedup=round(self.cost.fusible_speedup, 3),
        )

    def node_groups(self) -> dict[str, int]:
        """ "graph/node" -> a kernel number unique across the model's graphs, for colouring."""
        mapping: dict[str, int] = {}
        offset = 0
        for p in self.plans:
            for node, gid in p.group_of().items():
                mapping[f"{p.graph.name}/{node}"] = offset + gid
            offset += len(p.groups)
        return mapping


def analyse(capture: Capture, device: Device = DEFAULT) -> ModelAnalysis:
    plans = tuple(plan(g) for g in capture.graphs)
    return ModelAnalysis(
        capture=capture,
        plans=plans,
        cost=model_cost(list(plans), device),
        findings=tuple(materialized_findings(list(plans), device))
        + tuple(attention_findings(list(plans), device))
        + tuple(composite_findings(list(plans))),
        break_gains=break_gains(capture, list(plans), device),
    )


def kernel_numbers(analyses: list[ModelAnalysis]) -> dict[str, int]:
    """ "graph/node" -> kernel number, unique across several models' graphs."""
    mapping: dict[str, int] = {}
    offset = 0
    for a in analyses:
        for key, gid in a.node_groups().items():
            mapping[key] = offset + gid
        offset += sum(len(p.groups) for p in a.plans)
    return mapping


def plan_json(analyses: list[ModelAnalysis], device: Device = DEFAULT) -> dict:
    """The `plan` key of `fuselint graph`'s JSON: totals, per-model rows, groups, colours."""
    summaries = [a.summary() for a in analyses]
    graphs = [plan_summary(p, device) for a in analyses for p in a.plans]
    totals = {
        side: {
            key: sum(getattr(getattr(s, side), key) for s in summaries)
            for key in ("launches", "bytes", "time_us")
        }
        for side in ("eager", "fused")
    }
    return {
        **totals,
        "groups": [g for graph_plan in graphs for g in graph_plan["groups"]],
        "models": [s.as_json() for s in summaries],
        "graphs": graphs,
        "node_group": kernel_numbers(analyses),
    }
