"""FL230: hand-written composites found in the traced graph, where source matching cannot see them.

The FL2xx pattern rules read source text, so they find `torch.exp(x - x.amax(-1, ...)) / ...`
written in one expression but not the same softmax spread over helper functions or files.
After tracing, those helpers are one chain of ATen ops inside one planned reduction group.
This room recognizes the op structure of softmax, LayerNorm and RMSNorm in each reduction
group and reports the chain when

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

import numbers
import operator
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from fuselint.findings import Finding, Gain
from fuselint.fusion.plan import FusionPlan
from fuselint.fusion.plan_findings import _span

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
_USE_INSTEAD = {
    "softmax": "torch.softmax(x, dim=-1)",
    "LayerNorm": "F.layer_norm(x, x.shape[-1:], weight, bias, eps)",
    "RMSNorm": "F.rms_norm(x, x.shape[-1:], weight, eps)",
}


@dataclass(frozen=True)
class Composite:
    """One recognized chain: its name and its FX nodes in the order they compute."""

    name: str
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


def _last_dim(n: torch.fx.Node, dims: object) -> bool:
    """Whether a reduction's `dims` argument is exactly the last dimension of its input."""
    val = n.args[0].meta.get("val") if isinstance(n.args[0], torch.fx.Node) else None
    if val is None or not isinstance(dims, (list, tuple)) or len(dims) != 1:
        return False
    return dims[0] in (-1, val.dim() - 1)


def _reduce(n: object, names: tuple[str, ...]) -> bool:
    """A keepdim reduction named in `names` over the last dim."""
    if _op(n) not in names or len(n.args) < 2:
        return False
    keepdim = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
    return _last_dim(n, n.args[1]) and bool(keepdim)


def _match_softmax(div: torch.fx.Node) -> Composite | None:
    """div(exp(sub(x, amax(x, -1))), sum(that exp, -1))."""
    if _op(div) != "div" or len(div.args) != 2:
        return None
    e, s = div.args
    if _op(e) != "exp" or not _reduce(s, ("sum",)) or s.args[0] is not e:
        return None
    sub = e.args[0]
    if _op(sub) != "sub" or not _reduce(sub.args[1], ("amax",)) or sub.args[1].args[0] is not sub.args[0]:
        return None
    return Composite("softmax", (sub.args[1], sub, e, s, div))


def _is_eps_add(n: object) -> bool:
    return _op(n) == "add" and len(n.args) == 2 and isinstance(n.args[1], numbers.Number)


def _square_of(n: object) -> object:
    """x when n is x**2 or x*x, else None."""
    if _op(n) == "pow" and n.args[1] == 2:
        return n.args[0]
    if _op(n) == "mul" and len(n.args) == 2 and n.args[0] is n.args[1]:
        return n.args[0]
    return None


def _centered(x: object, stat_of: object) -> tuple[torch.fx.Node, ...] | None:
    """(mean, sub) when x is sub(y, mean(y, -1)) with y == stat_of (or any y when None)."""
    if _op(x) != "sub" or not _reduce(x.args[1], ("mean",)) or x.args[1].args[0] is not x.args[0]:
        return None
    if stat_of is not None and x.args[0] is not stat_of:
        return None
    return (x.args[1], x)


def _match_norm(out: torch.fx.Node) -> Composite | None:
    """x * rsqrt(stat + eps) or x / sqrt(stat + eps), as LayerNorm or RMSNorm."""
    if _op(out) == "mul" and len(out.args) == 2:
        root = next((a for a in out.args if _op(a) == "rsqrt"), None)
        x = out.args[1] if root is out.args[0] else out.args[0]
    elif _op(out) == "div" and len(out.args) == 2 and _op(out.args[1]) == "sqrt":
        root, x = out.args[1], out.args[0]
    else:
        return None
    if root is None or not isinstance(x, torch.fx.Node) or not _is_eps_add(root.args[0]):
        return None
    add = root.args[0]
    stat = add.args[0]
    tail = (add, root, out)
    if _reduce(stat, ("mean",)) and _square_of(stat.args[0]) is x:
        centered = _centered(x, None)
        if centered is None:
            return Composite("RMSNorm", (stat.args[0], stat, *tail))
        return Composite("LayerNorm", (*centered, stat.args[0], stat, *tail))
    if _op(stat) == "getitem" and stat.args[1] == 0 and _op(stat.args[0]) == "var_mean":
        vm = stat.args[0]
        if not _last_dim(vm, vm.args[1]) or _op(x) != "sub" or x.args[0] is not vm.args[0]:
            return None
        mean = x.args[1]
        if _op(mean) != "getitem" or mean.args[0] is not vm or mean.args[1] != 1:
            return None
        return Composite("LayerNorm", (vm, stat, mean, x, *tail))
    if _op(stat) == "var" and _last_dim(stat, stat.args[1]):
        centered = _centered(x, stat.args[0])
        if centered is not None:
            return Composite("LayerNorm", (*centered, stat, *tail))
    return None


def _with_affine(c: Composite, inside: set[str]) -> Composite:
    """Extend a normalization by the `* weight` and `+ bias` that follow it, when they do."""
    nodes = list(c.nodes)
    for op in ("mul", "add"):
        last = nodes[-1]
        users = list(last.users)
        if len(users) == 1 and _op(users[0]) == op and users[0].name in inside:
            nodes.append(users[0])
    return Composite(c.name, tuple(nodes))


def find_composites(nodes: list[torch.fx.Node]) -> list[Composite]:
    """Softmax, LayerNorm and RMSNorm chains among `nodes`, each node in at most one chain.

    Later nodes are tried first so that a chain is recognized from its final op and the
    longest reading (LayerNorm before the RMSNorm its tail also looks like) wins.
    """
    inside = {n.name for n in nodes}
    claimed: set[str] = set()
    found = []
    for n in reversed(nodes):
        if n.name in claimed:
            continue
        c = _match_softmax(n) or _match_norm(n)
        if c is None or any(m.name not in inside or m.name in claimed for m in c.nodes):
            continue
        if c.name != "softmax":
            c = _with_affine(c, inside - claimed)
        claimed.update(m.name for m in c.nodes)
        found.append(c)
    return sorted(found, key=lambda c: nodes.index(c.nodes[-1]))


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
                    f"use `{_USE_INSTEAD[c.name]}`"
                )
                details = (
                    ("composite", c.name),
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
