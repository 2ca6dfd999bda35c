"""FL230: hand-written composites found in the traced graph, where source matching cannot see them.

The FL2xx pattern rules read source text, so they find `torch.exp(x - x.amax(-1, ...)) / ...`
written in one expression but not the same softmax spread over helper functions or files.
After tracing, those helpers are one chain of ATen ops inside one planned reduction group.
This room matches the very `[pattern]` of the rules that FL230's rule file names in
`graph_patterns` (FL201 softmax, FL212 LayerNorm, FL214 RMSNorm) against each reduction
group, through the same canonical terms and matcher as the source side
(`fuselint.fusion.aten_terms`), and reports the chain when

- every op in it comes from an elementary user op (the node's `original_aten` is not a
  composite such as `aten._softmax`, its `source_fn_stack` is not `F.softmax`/`F.layer_norm`,
  and its frame is not inside torch), since a library composite already runs as one kernel
  in a fusing compiler and has a single call to point at;
- its ops come from at least two functions or files: a chain written in one function is the
  FL2xx static rules' to report, so FL230 does not duplicate them.

The finding sits on the user's line of the chain's final op and counts the eager kernels the
chain costs beyond the single kernel of the library op.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from fuselint.catalog import Catalog, load_catalog
from fuselint.findings import Finding, Gain
from fuselint.fusion.aten_terms import AtenTerms, cone
from fuselint.fusion.plan import FusionPlan
from fuselint.fusion.plan_findings import _span
from fuselint.source.patterns import CompiledRule, compiled
from fuselint.source.patterns_canon import PARAMS, Term
from fuselint.source.patterns_match import Match, match

# What the library composites decompose from: a chain carrying one of these is not hand-written.
_COMPOSITE_ATEN = {
    "_softmax",
    "softmax",
    "_log_softmax",
    "log_softmax",
    "_safe_softmax",
    "native_layer_norm",
    "layer_norm",
    "rms_norm",
    "_fused_rms_norm",
    "native_group_norm",
    "group_norm",
    "native_batch_norm",
    "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional",
}
_COMPOSITE_SOURCE = {
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "Softmax",
    "LogSoftmax",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
}
_LIBRARY = str(Path(torch.__file__).resolve().parent)  # frames in here are library code
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


@dataclass(frozen=True)
class Composite:
    """One recognized chain: the library function it computes, the rule that describes it, and
    its FX nodes in the order they compute."""

    name: str
    rule: str
    use_instead: str
    nodes: tuple[torch.fx.Node, ...]


def _op(n: object) -> str:
    """Short ATen name of an FX node ("amax", "sub", "getitem"), "" for anything else."""
    if not isinstance(n, torch.fx.Node) or n.op != "call_function":
        return ""
    if n.target is operator.getitem:
        return "getitem"
    return _op_name(n.target)


def _op_name(overload: object) -> str:
    """ "aten.amax.default" -> "amax"."""
    parts = str(overload).split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "aten" else parts[0]


def composite_rules(catalog: Catalog | None = None) -> list[CompiledRule]:
    """The pattern rules FL230 looks for in traced graphs (its rule file's `graph_patterns`)."""
    catalog = catalog or load_catalog()
    return [compiled(catalog[code]) for code in catalog["FL230"].graph_patterns]


def _library_call(template: str) -> tuple[str, str]:
    """The replacement's function ("torch.nn.functional.layer_norm") and its last name."""
    qual = template.split("(", 1)[0].strip()
    return qual, qual.rsplit(".", 1)[-1]


def _candidates(terms: AtenTerms, n: torch.fx.Node, rules: list[CompiledRule]):
    """(covered nodes, rule, pattern) for every rule alternative whose pattern has its root at n."""
    t = terms.term(n)
    for cr in rules:
        for p in cr.patterns:
            if not p.required <= t.ops:
                continue
            m = next(match(p, p.term, t, Match()), None)
            if m is None:
                continue
            inputs = {b.node for b in m.bindings.values() if isinstance(b, Term) and b.node is not None}
            yield cone(n, inputs), cr, p


def _with_affine(nodes: list[torch.fx.Node], library: str, inside: set[str]) -> list[torch.fx.Node]:
    """Extend a chain by the `* weight` and `+ bias` that follow it, where the library function
    takes them (its signature has `weight`, `bias`)."""
    params = {name for name, _default in PARAMS.get(library, ())}
    for op, param in (("mul", "weight"), ("add", "bias")):
        users = list(nodes[-1].users)
        if param in params and len(users) == 1 and _op(users[0]) == op and users[0].name in inside:
            nodes.append(users[0])
    return nodes


def find_composites(nodes: list[torch.fx.Node], rules: list[CompiledRule] | None = None) -> list[Composite]:
    """Chains among `nodes` that a composite rule's pattern describes, each node in at most one.

    Later nodes are tried first so that a chain is recognized from its final op, and where two
    rules match at one node the longer reading wins (a LayerNorm's tail is also an RMSNorm).
    """
    rules = composite_rules() if rules is None else rules
    order = {n: i for i, n in enumerate(nodes)}
    inside = {n.name for n in nodes}
    terms = AtenTerms()
    claimed: set[str] = set()
    found = []
    for n in reversed(nodes):
        if n.name in claimed:
            continue
        best = None
        for covered, cr, p in _candidates(terms, n, rules):
            if any(m.name not in inside or m.name in claimed for m in covered):
                continue
            if best is None or len(covered) > len(best[0]):
                best = (covered, cr, p)
        if best is None:
            continue
        covered, cr, p = best
        library, name = _library_call(p.replace)
        chain = _with_affine(sorted(covered, key=order.__getitem__), library, inside - claimed)
        claimed.update(m.name for m in chain)
        use = " ".join(p.replace.replace("$", "").split())
        found.append(Composite(name, cr.rule.code, use, tuple(chain)))
    return sorted(found, key=lambda c: order[c.nodes[-1]])


def _frame(n: torch.fx.Node) -> tuple[str, int, str] | None:
    """Innermost frame (file, line, function) of the node's stack trace."""
    frames = _FRAME.findall(n.meta.get("stack_trace") or "")
    if not frames:
        return None
    file, line, func = frames[-1]
    return file, int(line), func


def is_hand_written(c: Composite) -> bool:
    """No node of the chain comes from a library composite."""
    for n in c.nodes:
        original = n.meta.get("original_aten")
        if original is not None and _op_name(original) in _COMPOSITE_ATEN:
            return False
        stack = n.meta.get("source_fn_stack") or []
        if stack and getattr(stack[-1][1], "__name__", str(stack[-1][1])) in _COMPOSITE_SOURCE:
            return False
        frame = _frame(n)
        if frame is not None and str(Path(frame[0]).resolve()).startswith(_LIBRARY):
            return False
    return True


def composite_findings(plans: list[FusionPlan]) -> list[Finding]:
    """FL230 findings: hand-written composites spread over several functions or files."""
    findings = []
    for p in plans:
        dag = p.graph.dag
        for group in p.groups:
            if group.kind != "reduction":
                continue
            fx_nodes = [dag.nodes[name]["fx"] for name in group.nodes]
            for c in find_composites(fx_nodes):
                if not is_hand_written(c):
                    continue
                frames = {f for f in (_frame(n) for n in c.nodes) if f is not None}
                places = {(file, func) for file, _line, func in frames}
                if len(places) < 2:
                    continue  # written in one function: the FL2xx source rules see it
                final = dag.nodes[c.nodes[-1].name]
                if not final["file"] or not final["line"]:
                    continue  # no user frame to point at
                ops = sum(_op(n) != "getitem" for n in c.nodes)  # getitems are views, not kernels
                span, source = _span(final["file"], final["line"])
                funcs = sorted({func for _file, func in places})
                message = (
                    f"hand-written {c.name} spread over {len(places)} functions ({', '.join(funcs)}): "
                    f"{ops} eager kernels where one fused {c.name} kernel does it; "
                    f"use `{c.use_instead}` ({c.rule})"
                )
                details = (
                    ("composite", c.name),
                    ("rule", c.rule),
                    ("graph", p.graph.name),
                    ("nodes", ",".join(n.name for n in c.nodes)),
                    ("lines", ",".join(f"{file}:{line}" for file, line, _f in sorted(frames))),
                )
                findings.append(
                    Finding(
                        code="FL230",
                        message=message,
                        span=span,
                        gain=Gain(launches=float((ops - 1) * p.graph.calls)),
                        source_line=source,
                        details=details,
                    )
                )
    return findings
