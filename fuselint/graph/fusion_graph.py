"""FusionGraph: one ATen FX graph held as a networkx DAG of ops, each with its kind.

Nodes are keyed by FX node name. Every node carries:
  op      the ATen overload ("aten.add.Tensor"), "input" for placeholders/attributes
  kind    input | pointwise | reduction | matmul | conv | view | injective | other
  shape   output shape (tuple of ints; a tuple of shapes for multi-output ops)
  dtype   output dtype ("float32"), "" when it has none
  numel   output elements (summed over the outputs of a multi-output op)
  bytes   output bytes (likewise summed)
  file, line, module   the user's source location and nn.Module path ("" / 0 if unknown)
  is_output            the value leaves the graph
  fx                   the torch.fx.Node itself (not serialized)
Edges run producer -> consumer and carry the bytes the consumer reads.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
import torch
import torch.fx
from torch.utils.flop_counter import flop_registry

from fuselint.graph.op_facts import KIND_OF

if TYPE_CHECKING:
    from fuselint.graph.eager_probe import EagerSdpa

KINDS = ("input", "pointwise", "reduction", "matmul", "conv", "view", "injective", "other")

_FLOP_PACKETS = frozenset(getattr(op, "__name__", str(op)).split(".")[-1] for op in flop_registry)

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def op_kind(node: torch.fx.Node) -> str:
    """Classify an FX node by what a fusing compiler can do with it."""
    if node.op in ("placeholder", "get_attr"):
        return "input"
    if node.op != "call_function":
        return "other"
    target = node.target
    if target is operator.getitem:
        return "view"
    if not isinstance(target, torch._ops.OpOverload):
        return "other"
    name = target.overloadpacket.__name__
    if target.is_view:
        return "view"
    if KIND_OF.get(name) == "conv":
        return "conv"
    if name in _FLOP_PACKETS:
        return "matmul"
    tags = set(target.tags)
    if torch.Tag.pointwise in tags:
        return "pointwise"
    if torch.Tag.reduction in tags:
        return "reduction"
    return KIND_OF.get(name, "other")


def _concrete(n) -> int:
    try:
        return int(n)
    except (TypeError, ValueError):
        hint = getattr(getattr(n, "node", None), "hint", None)
        return int(hint) if hint is not None else 1


def _tensor_facts(val) -> tuple[object, str, int, int]:
    """(shape, dtype, numel, bytes) of a FakeTensor or a tuple of them."""
    if isinstance(val, torch.Tensor):
        shape = tuple(_concrete(s) for s in val.shape)
        numel = 1
        for s in shape:
            numel *= s
        return shape, str(val.dtype).removeprefix("torch."), numel, numel * val.element_size()
    if isinstance(val, (tuple, list)):
        parts = [_tensor_facts(v) for v in val if isinstance(v, torch.Tensor)]
        if parts:
            dtypes = {p[1] for p in parts}
            return (
                tuple(p[0] for p in parts),
                dtypes.pop() if len(dtypes) == 1 else "mixed",
                sum(p[2] for p in parts),
                sum(p[3] for p in parts),
            )
    return (), "", 0, 0


def source_location(node: torch.fx.Node) -> tuple[str, int]:
    """The innermost user frame of the node's stack trace, as (file, line)."""
    trace = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    if not frames:
        return "", 0
    file, line, _func = frames[-1]
    return file, int(line)


def module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, _cls = list(stack.values())[-1]
    # dynamo spells paths as "L['self'].layers[0].mlp"; keep the attribute path.
    path = re.sub(r"^L\['[^']*'\]\.?", "", str(path))
    return re.sub(r"\._modules\['([^']*)'\]", r".\1", path)


@dataclass
class FusionGraph:
    """A DAG of ATen ops (networkx) built from one FX graph, plus the graph itself."""

    dag: nx.DiGraph
    gm: torch.fx.GraphModule
    name: str = "graph0"
    # How many times the captured graph runs per call of the model.
    calls: int = 1
    # The SDPA calls the model's eager code makes (graph/eager_probe.py), the same for every graph
    # of one capture; None: not probed, or the probe could not run the entry.
    eager_sdpa: tuple[EagerSdpa, ...] | None = None

    @classmethod
    def from_fx(cls, gm: torch.fx.GraphModule, name: str = "graph0", calls: int = 1) -> FusionGraph:
        dag = nx.DiGraph()
        outputs: set[str] = set()
        for node in gm.graph.nodes:
            if node.op == "output":
                for arg in node.all_input_nodes:
                    outputs.add(arg.name)
                continue
            shape, dtype, numel, nbytes = _tensor_facts(node.meta.get("val"))
            file, line = source_location(node)
            target = node.target
            op = "input" if node.op in ("placeholder", "get_attr") else str(target)
            if target is operator.getitem:
                op = "getitem"
            dag.add_node(
                node.name,
                op=op,
                kind=op_kind(node),
                shape=shape,
                dtype=dtype,
                numel=numel,
                bytes=nbytes,
                file=file,
                line=line,
                module=module_path(node),
                is_output=False,
                fx=node,
            )
            for arg in node.all_input_nodes:
                dag.add_edge(arg.name, node.name, bytes=dag.nodes[arg.name]["bytes"])
        for out in outputs:
            if out in dag:
                dag.nodes[out]["is_output"] = True
        return cls(dag=dag, gm=gm, name=name, calls=calls)

    def ops(self, kind: str | None = None) -> list[str]:
        """Node names in topological (FX) order, optionally of one kind."""
        return [n for n, d in self.dag.nodes(data=True) if kind is None or d["kind"] == kind]

    def to_json(self) -> dict:
        nodes = []
        for name, data in self.dag.nodes(data=True):
            row = {k: v for k, v in data.items() if k != "fx"}
            row["name"] = name
            nodes.append(row)
        edges = [{"src": u, "dst": v, "bytes": d.get("bytes", 0)} for u, v, d in self.dag.edges(data=True)]
        return {"name": self.name, "calls": self.calls, "nodes": nodes, "edges": edges}
