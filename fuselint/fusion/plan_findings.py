"""Findings read off a FusionPlan.

FL301: a multi-consumer intermediate that the plan must write to memory because its consumers
land in different kernels (and recomputing it there is not cheap). The finding sits on the
user's line that computes the value and carries the bytes that the write and the extra reads
cost per call of the model, as a Gain priced on a device.

FL302: an attention call (SDPA) that compile runs on the math kernel (fp32 matmuls and a
softmax over the materialised scores) where a fused kernel would run with another mask form
(fusion/attention.py). The finding sits on the user's line of the call, gives the reason, the
change that avoids it, and the time the fused kernel saves, per call of the model.
"""

from __future__ import annotations

import linecache

from fuselint.findings import Finding, Gain, Span, format_bytes
from fuselint.fusion.attention import choose_backend, eager_call, sdpa_call
from fuselint.fusion.cost import Cost, fused_attention_cost, math_attention_cost
from fuselint.fusion.devices import DEFAULT, Device
from fuselint.fusion.plan import FusionPlan, GraphFacts, Materialized


def _span(path: str, line: int) -> tuple[Span, str]:
    text = linecache.getline(path, line).rstrip("\n")
    stripped = text.strip()
    if not stripped:
        return Span(path, line, 1, line, 1), ""
    start = len(text) - len(text.lstrip()) + 1
    return Span(path, line, start, line, start + len(stripped)), stripped


def materialized_findings(plans: list[FusionPlan], device: Device = DEFAULT) -> list[Finding]:
    """FL301 findings for every plan of a model, gains weighted by each graph's calls.

    One finding per source line: several materialized values computed on one line (a
    decomposed op) are reported together.
    """
    by_line: dict[tuple[str, int], list[tuple[FusionPlan, Materialized, int]]] = {}
    for p in plans:
        facts = GraphFacts(p.graph)
        home = p.group_of()
        for m in p.materialized:
            node = p.graph.dag.nodes[facts.home[m.node]]
            if not node["file"] or not node["line"]:
                continue  # no user frame: nothing to point at
            # one write, and one read by each kernel other than the one computing it
            moved = m.bytes * (1 + sum(g != home[facts.home[m.node]] for g in m.groups))
            by_line.setdefault((node["file"], node["line"]), []).append((p, m, moved * p.graph.calls))
    findings = []
    for (path, line), items in sorted(by_line.items()):
        span, source = _span(path, line)
        moved = sum(b for _p, _m, b in items)
        p, m, _b = items[0]
        node = p.graph.dag.nodes[GraphFacts(p.graph).home[m.node]]
        op = node["fx"].meta.get("original_aten") or node["op"]  # the user's op, before decomposition
        shape = "x".join(str(s) for s in p.graph.dag.nodes[m.node]["shape"]) or "scalar"
        message = (
            f"`{op}` result ({shape} {p.graph.dag.nodes[m.node]['dtype']}) is written to memory "
            f"because its readers run in {len(m.groups)} kernels: {m.reason}"
        )
        if len(items) > 1:
            message += f" (and {len(items) - 1} more value(s) on this line)"
        details = tuple(
            (key, val)
            for p_, m_, _b in items
            for key, val in (
                ("graph", p_.graph.name),
                ("node", m_.node),
                ("kernels", ",".join(map(str, m_.groups))),
                ("bytes", str(m_.bytes)),
            )
        )
        gain = Gain(
            launches=0.0,
            bytes=float(moved),
            time_us=moved / (device.bandwidth_gbs * 1e3),
            device=device.name,
        )
        findings.append(
            Finding(
                code="FL301",
                message=f"{message}; costs {format_bytes(moved)} of memory traffic per call",
                span=span,
                gain=gain,
                source_line=source,
                details=details,
            )
        )
    return findings


def attention_findings(plans: list[FusionPlan], device: Device = DEFAULT) -> list[Finding]:
    """FL302 findings: SDPA calls that compile runs on the math path, one per source line."""
    by_line: dict[tuple[str, int], list] = {}
    for p in plans:
        facts = GraphFacts(p.graph)
        for c in facts.kind:
            node = p.graph.dag.nodes[c]
            call = sdpa_call(node["fx"])
            if call is None or not node["file"] or not node["line"]:
                continue
            backend = choose_backend(call)
            if backend.fused:
                continue
            slow = math_attention_cost(call, device).scaled(p.graph.calls)
            fast = fused_attention_cost(call, device).scaled(p.graph.calls)
            eager_fused = choose_backend(eager_call(call, p.graph.eager_sdpa)).fused
            by_line.setdefault((node["file"], node["line"]), []).append((backend, slow, fast, eager_fused))
    findings = []
    for (path, line), items in sorted(by_line.items()):
        span, source = _span(path, line)
        backend = items[0][0]
        slow = sum((i[1] for i in items), Cost())
        fast = sum((i[2] for i in items), Cost())
        than = (
            "; eager runs it on a fused kernel (the mask is built only while tracing), so compile is "
            "slower than eager here"
            if all(i[3] for i in items)
            else ""
        )
        message = (
            f"attention runs on SDPA's math kernel under compile (fp32 matmuls + softmax over the scores: "
            f"~{slow.time_us:.0f} us per call vs ~{fast.time_us:.0f} us fused on {device.name}){than}: "
            f"{backend.reason}; {backend.fix}"
        )
        findings.append(
            Finding(
                code="FL302",
                message=message,
                span=span,
                gain=Gain(
                    launches=slow.launches - fast.launches,
                    bytes=slow.bytes - fast.bytes,
                    time_us=slow.time_us - fast.time_us,
                    device=device.name,
                ),
                source_line=source,
                details=(("calls", str(len(items))), ("backend", backend.name)),
            )
        )
    return findings
