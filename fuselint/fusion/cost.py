"""Cost model: launches, bytes, flops and estimated time of a graph run eagerly vs as planned.

Eager runs one kernel per ATen op as the user called it: ops that a decomposition split up
(F.gelu, softmax, layer_norm, linear) count as the one kernel eager launches for them, found
through each FX node's `from_node` provenance; every kernel reads all its inputs and writes all
its outputs. Planned runs one kernel per FusionGroup and moves only the tensors that cross
group boundaries. A kernel takes max(bytes / bandwidth, flops / peak) + launch cost on a
Device (devices.py). Views cost nothing. A model is a list of graphs, each weighted by how
many times it runs per call (FusionGraph.calls). scaled_dot_product_attention costs the kernel a
CUDA GPU picks for its call (attention.py): one fused kernel, or the math path's fp32 kernels.

Accuracy against KNOWLEDGE.md's H200 measurements (8192x8192 fp32, tests/fusion/test_fusion_cost.py):
planned time within 6% of Inductor's for cos->sin, bias+GELU+residual, SiLU*mul, tanh-GELU,
softmax and residual+LayerNorm; eager time within 10% for pointwise chains, but 20-30% low for
eager reductions and broadcasts, which run below copy bandwidth (so predicted gains are
conservative there).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import networkx as nx
import torch
from torch.utils.flop_counter import FlopCounterMode

from fuselint.fusion.attention import (
    FUSED_ATTENTION_EFFICIENCY,
    SdpaCall,
    choose_backend,
    eager_call,
    fused_work,
    mask_cone,
    math_parts,
    sdpa_call,
)
from fuselint.fusion.devices import DEFAULT, Device, stem_family
from fuselint.fusion.plan import OPAQUE, FusionPlan, GraphFacts
from fuselint.graph.layout import channels_last, conv_eager_layout, eager_layout_name, eager_val, layout_name


@dataclass(frozen=True)
class Cost:
    launches: float = 0
    bytes: float = 0
    flops: float = 0
    time_us: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.launches + other.launches,
            self.bytes + other.bytes,
            self.flops + other.flops,
            self.time_us + other.time_us,
        )

    def __sub__(self, other: Cost) -> Cost:
        return self + other.scaled(-1)

    def scaled(self, k: float) -> Cost:
        return Cost(self.launches * k, self.bytes * k, self.flops * k, self.time_us * k)

    def to_json(self) -> dict:
        return {"launches": self.launches, "bytes": self.bytes, "flops": self.flops, "time_us": self.time_us}


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 1.0


@dataclass(frozen=True)
class GroupCost:
    group: int
    kind: str
    eager: Cost  # the eager kernels whose first op lands in this group
    fused: Cost

    @property
    def fusible(self) -> bool:
        return self.kind not in OPAQUE


class _EagerVsFused:
    """What a graph's or model's eager and fused costs say together."""

    eager: Cost
    fused: Cost

    @property
    def saving(self) -> Cost:
        return self.eager - self.fused

    @property
    def speedup(self) -> float:
        return _ratio(self.eager.time_us, self.fused.time_us)


@dataclass(frozen=True)
class GraphCost(_EagerVsFused):
    graph: str
    calls: int
    device: str
    eager: Cost  # per run of the graph
    fused: Cost
    groups: tuple[GroupCost, ...]

    @property
    def fusible_speedup(self) -> float:
        """Speedup of the fusible part alone (matmul/conv/other kernels left out)."""
        eager = sum(g.eager.time_us for g in self.groups if g.fusible)
        fused = sum(g.fused.time_us for g in self.groups if g.fusible)
        return _ratio(eager, fused)


@dataclass(frozen=True)
class ModelCost(_EagerVsFused):
    device: str
    graphs: tuple[GraphCost, ...]

    @property
    def eager(self) -> Cost:
        return sum((g.eager.scaled(g.calls) for g in self.graphs), Cost())

    @property
    def fused(self) -> Cost:
        return sum((g.fused.scaled(g.calls) for g in self.graphs), Cost())

    @property
    def fusible_speedup(self) -> float:
        parts = [(gc, g.calls) for g in self.graphs for gc in g.groups if gc.fusible]
        return _ratio(
            sum(gc.eager.time_us * k for gc, k in parts), sum(gc.fused.time_us * k for gc, k in parts)
        )


# ---------------------------------------------------------------------------------------------


# fp32 operations per element of pointwise ops far costlier than one: erf (the exact GELU's) runs as
# a long polynomial with branches. GELU(erf) kernels measured on the H200 (bench/results/h200-eff/
# pa.json: BERT's, ViT's and ConvNeXt's, PyTorch's and fuselint's alike) run at 650-740 G elements/s
# whatever their size, compute-bound below the copy bandwidth (~1000 G elements/s of bf16): 70-79
# operations per element at the 51.3 TFLOP/s fp32 rate, of which the GELU's other ops are ~6; on the
# H100 (bench/results/h100-s4/kernel_rates.json: 13-210 M elements) 639-704 G elements/s, 73-76
# operations per element at its 51.6 TFLOP/s.
OPS_PER_ELEMENT = {torch.ops.aten.erf.default: 68}


def node_flops(facts: GraphFacts, node: str) -> int:
    """Flops of one compute node: torch's flop counter for matmul/conv, else one per element
    (OPS_PER_ELEMENT for the costlier ops)."""
    kind = facts.kind[node]
    fx = facts.fg.dag.nodes[node]["fx"]
    if kind in ("matmul", "conv"):
        counted = _counted_flops(fx, facts.shape)
        if counted is not None:
            return counted
    if kind == "reduction":
        return max((facts.numel(p) for p, _v in facts.reads[node]), default=0)
    return facts.numel(node) * OPS_PER_ELEMENT.get(fx.target, 1)


def _meta(x, shapes: dict):
    if isinstance(x, torch.fx.Node):
        val = x.meta.get("val")
        if isinstance(val, torch.Tensor):  # concrete sizes (hints for symbolic ones)
            return torch.empty(tuple(shapes[x.name]), dtype=val.dtype, device="meta")
        return val
    if isinstance(x, (list, tuple)):
        return type(x)(_meta(a, shapes) for a in x)
    return x


def _counted_flops(fx: torch.fx.Node, shapes: dict) -> int | None:
    try:
        args = _meta(fx.args, shapes)
        kwargs = {k: _meta(v, shapes) for k, v in fx.kwargs.items()}
        with FlopCounterMode(display=False) as counter:
            fx.target(*args, **kwargs)
        return int(counter.get_total_flops())
    except (RuntimeError, TypeError, ValueError, NotImplementedError):  # meta cannot run it
        return None


def kernel_cost(
    facts: GraphFacts,
    nodes: set[str],
    device: Device,
    flops: dict[str, int],
    launches: int = 1,
    eager: bool = False,
) -> Cost:
    """A kernel (or `launches` of them, for a split reduction) computing `nodes`: reads what
    it needs from outside, writes what leaves it. `eager`: priced as eager runs it (the layout
    of a depthwise convolution is cuDNN's choice there)."""
    if not nodes:
        return Cost()
    read_nodes: dict[str, set[str]] = {}
    for c in nodes:
        for p, v in facts.reads[c]:
            if facts.home[v] not in nodes:
                read_nodes.setdefault(v, set()).add(p)
    # A value read through slices costs the slices; through an expand, the value itself.
    read = sum(min(facts.bytes[v], sum(facts.bytes[p] for p in ps)) for v, ps in read_nodes.items())
    written = 0
    for v, h in facts.home.items():
        if h in nodes and (
            v in facts.graph_outputs or any(u not in nodes for u in facts.consumers.get(v, []))
        ):
            written += facts.bytes[v]
    total_flops = sum(flops[c] for c in nodes)
    # The kernel's math runs at the rate of its slowest dtype (fp32 unless every op is half);
    # the name sorts second so that the choice never depends on the order of `nodes`.
    dtype = min({facts.fg.dag.nodes[c]["dtype"] for c in nodes}, key=lambda d: (device.tflops(d), d))
    shaped = {c: _shaped_compute_us(facts, c, device, flops, eager) for c in sorted(nodes)}
    priced = {c: t for c, t in shaped.items() if t is not None}
    compute_us = None
    if priced:  # matmuls and convolutions at the rates measured for their shapes
        rest = sum(flops[c] for c in nodes if c not in priced)
        compute_us = sum(priced.values()) + rest / (device.tflops(dtype) * 1e6)
    # Kernels that run below the vectorised copy rate: eager's own, and planned ones of two kinds
    memory_us = None
    if eager:
        memory_us = _eager_norm_us(facts, nodes, device, read + written)
        path = eager_unvectorised(facts, nodes) if memory_us is None else None
        if path is not None:
            memory_us = device.strided_us(read + written, cat=path == "cat", permuted=path == "permuted")
    elif fused_outer_reduction(facts, nodes):
        memory_us = device.outer_reduction_us(read + written, launches)
    elif fused_broadcast(facts, nodes, read_nodes):
        memory_us = device.broadcast_us(read + written, launches)
    time = device.time_us(read + written, total_flops, dtype, launches, compute_us, memory_us)
    return Cost(launches, read + written, total_flops, time)


def _eager_norm_us(facts: GraphFacts, nodes: set[str], device: Device, nbytes: int) -> float | None:
    """Memory time of an eager normalisation kernel (the nodes one `batch_norm` or `layer_norm` call
    decomposed into) or max-pool kernel at the rate the device table holds for it: inference
    BatchNorm at the rate swept for its layout and image size, LayerNorm at its per-row and
    per-element cost, max-pool at its layout's rate; None for any other kernel, or a table without
    them."""
    if device.efficiency is None:
        return None
    for c in sorted(nodes):
        fx = facts.fg.dag.nodes[c]["fx"]
        aten = str(fx.meta.get("original_aten", ""))
        if "max_pool2d" in aten and fx.args and isinstance(fx.args[0], torch.fx.Node):
            if _is_image(fx.args[0].meta.get("val")):
                return device.max_pool_us(nbytes, eager_layout_name(fx.args[0]))
        if "native_layer_norm" in aten and fx.target is torch.ops.aten.var_mean.correction:
            x = fx.args[0].meta.get("val") if isinstance(fx.args[0], torch.fx.Node) else None
            if not isinstance(x, torch.Tensor) or not fx.args[1]:
                return None
            width = math.prod(x.shape[d] for d in fx.args[1])
            return device.layer_norm_us(nbytes, x.numel() // max(width, 1), width)
        if "batch_norm" not in aten or not device.efficiency.batch_norm:
            continue
        image = next((a for a in fx.all_input_nodes if _is_image(a.meta.get("val"))), None)
        if image is None:  # one of the ops on its per-channel statistics
            continue
        # in the layout eager runs it in: NCHW after an NCHW convolution, whatever the layout
        # pass made of the graph's value (PyTorch's NCHW kernel is 1.5x slower on the H200)
        x = image.meta["val"]
        return device.batch_norm_us(nbytes, eager_layout_name(image), x.shape[2] * x.shape[3])
    return None


def _dense_dims(t: torch.Tensor) -> tuple[tuple[int, int], ...]:
    return tuple((n, st) for n, st in zip(t.shape, t.stride(), strict=True) if n != 1)


def eager_unvectorised(facts: GraphFacts, nodes: set[str]) -> str | None:
    """ "elementwise" or "cat" where eager runs this kernel on PyTorch's unvectorised path: an
    elementwise op (or a cat) one of whose tensor operands has another shape (broadcast) or other
    strides than its output, as eager makes them (`eager_val`): TensorIterator vectorises only
    operands that all share the output's layout, and `cat` copies inputs that are not contiguous
    element by element. "permuted" where such an operand has the output's shape but another
    innermost dim (a residual added across NHWC -> NCHW permute: its reads are uncoalesced, the
    slowest of these kernels; a transpose that keeps the last dim reads whole rows). None for any other kernel (normalisations have kernels of their own)."""
    kinds = {facts.kind[c] for c in nodes}
    fxs = [facts.fg.dag.nodes[c]["fx"] for c in sorted(nodes, key=facts.order.get)]
    cat = len(fxs) == 1 and fxs[0].target is torch.ops.aten.cat.default
    if not cat and (kinds != {"pointwise"} or any("_norm" in str(f.meta.get("original_aten")) for f in fxs)):
        return None
    written = [
        c
        for c in nodes
        if c in facts.graph_outputs or any(u not in nodes for u in facts.consumers.get(c, []))
    ]
    out = (
        eager_val(fxs[-1])
        if not written
        else eager_val(facts.fg.dag.nodes[max(written, key=facts.order.get)]["fx"])
    )
    if not isinstance(out, torch.Tensor) or out.numel() <= 1:
        return None
    found = None
    for c in sorted(nodes):
        for p, v in facts.reads[c]:
            t = eager_val(facts.fg.dag.nodes[p]["fx"])
            if facts.home[v] in nodes or not isinstance(t, torch.Tensor) or t.numel() <= 1:
                continue
            if cat and not t.is_contiguous():
                return "cat"
            inner = _innermost(t) if not cat and t.shape == out.shape else None
            if inner is not None and _innermost(out) not in (None, inner):
                return "permuted"
            if not cat and (t.shape != out.shape or _dense_dims(t) != _dense_dims(out)):
                found = "elementwise"
    return found


def _innermost(t: torch.Tensor) -> int | None:
    """The dim of size > 1 with the smallest stride (the one a warp's reads run along); None for an
    expanded tensor (a stride of 0: a broadcast, not a permutation) or a single element."""
    dims = [d for d in range(t.dim()) if t.shape[d] != 1]
    if not dims or any(t.stride(d) == 0 for d in dims):
        return None
    return min(dims, key=lambda d: (t.stride(d), d))


def fused_broadcast(facts: GraphFacts, nodes: set[str], read_nodes: dict[str, set[str]]) -> bool:
    """A planned pointwise kernel that reads a value through a broadcast: one of more than one
    element but fewer than the largest value it writes (BatchNorm's per-channel statistics and
    affine, a squeeze-excite gate, a layer scale). Such kernels index the small operand per
    element and run below the rate of plain pointwise ones (Device.broadcast_us)."""
    if {facts.kind[c] for c in nodes} != {"pointwise"}:
        return False
    largest = max(map(facts.numel, nodes), default=0)
    return any(1 < facts.numel(v) < largest for v in read_nodes)


def fused_outer_reduction(facts: GraphFacts, nodes: set[str]) -> bool:
    """A planned kernel reducing a channels_last image over its spatial dims (H and W, not C, the
    innermost): a squeeze-excite mean. Such kernels walk columns and run below the rate of row
    reductions (Device.outer_reduction_us)."""
    for c in sorted(nodes):
        if facts.kind[c] != "reduction":
            continue
        src = facts.fg.dag.nodes[c]["fx"].args[0]
        dims = facts.rinfo[c][1]
        if isinstance(src, torch.fx.Node) and channels_last(src.meta.get("val")) and dims and 1 not in dims:
            return True
    return False


def _is_image(val: object) -> bool:
    return isinstance(val, torch.Tensor) and val.dim() == 4


def _shaped_compute_us(
    facts: GraphFacts, c: str, device: Device, flops: dict[str, int], eager: bool
) -> float | None:
    """Math time of a matmul or convolution node at the rate the device reaches for its shape
    (`Device.efficiency`): a matmul as an (M x K) @ (K x N) GEMM, a convolution as the implicit
    GEMM cuDNN runs (M = batch x output pixels, N = output channels, K = input channels x taps,
    once per group), a depthwise one at the rate swept for its layout, which eager takes from
    cuDNN's rule and the compiled plan from its own graph. None: priced on the roofline."""
    if device.efficiency is None or facts.kind[c] not in ("matmul", "conv") or not flops[c]:
        return None
    fx = facts.fg.dag.nodes[c]["fx"]
    dtype = facts.fg.dag.nodes[c]["dtype"]
    out = facts.shape.get(c)
    if not out or len(out) < 2 or not all(out):
        return None
    if facts.kind[c] == "matmul":
        n = out[-1]
        m = math.prod(out) // n
        k = flops[c] / (2 * m * n)
        return device.gemm_us(m, n, k, dtype) if k >= 1 else None  # k < 1: no counted flops
    if fx.target is not torch.ops.aten.convolution.default or fx.args[6]:  # transposed
        return None
    weight = fx.args[1]
    w = None
    if isinstance(weight, torch.fx.Node):
        val = weight.meta.get("val")
        w = facts.shape.get(weight.name) or (tuple(val.shape) if isinstance(val, torch.Tensor) else None)
    groups = fx.args[8]
    if not w or len(w) != len(out):
        return None
    if groups > 1 and w[1] == 1:  # depthwise
        layout = conv_eager_layout(fx)[0] if eager else layout_name(fx.meta.get("val"))
        return device.depthwise_us(flops[c], w[2], layout)
    m = math.prod(out) // out[1]
    taps = math.prod(w[2:])
    if groups == 1:  # an image stem: cuDNN's kernels for few input channels (Device.stem_us)
        layout = conv_eager_layout(fx)[0] if eager else layout_name(fx.meta.get("val"))
        stem = device.stem_us(m, w[1], out[1], taps, layout)
        if stem is not None:
            return stem
    hw = math.sqrt(math.prod(out[2:])) if len(out) > 2 else 1
    return groups * device.conv_us(m, w[1], out[1] / groups, taps, hw, dtype)


# Functions that return their input itself when not training (`F.dropout(x, training=False) is
# x`): eager launches nothing for them, while the traced ATen graph holds a clone in their place.
_EVAL_IDENTITY = re.compile(
    r"<(function|built-in method) (dropout|dropout1d|dropout2d|dropout3d|alpha_dropout|"
    r"feature_alpha_dropout|feature_dropout)\b"
)


def _eager_identity(fx: torch.fx.Node) -> bool:
    """A clone made from an eval-mode dropout call: no kernel in eager (the call returns its
    input). The graph's clone stays priced in the fused plan, where it costs what its group does."""
    if fx.target is not torch.ops.aten.clone.default or fx.kwargs.get("memory_format") not in (
        None,
        torch.preserve_format,
    ):
        return False
    origin = fx.meta.get("from_node") or []
    return bool(origin) and bool(_EVAL_IDENTITY.match(str(getattr(origin[-1], "target", ""))))


def eager_absent(facts: GraphFacts, compiled: dict[str, SdpaCall], eager: dict[str, SdpaCall]) -> set[str]:
    """Compute nodes eager code never runs: those that only build the mask of an SDPA call that
    passes a mask in the graph (`compiled`) and none as eager makes it (`eager`: the eager probe's
    record, or an all-true mask that libraries build only while tracing; attention.eager_call)."""
    sdpa, cone = set(), set()
    for c in sorted(compiled):
        if compiled[c].mask is not None and eager[c].mask is None:
            sdpa.add(c)
            cone |= mask_cone(facts.fg.dag.nodes[c]["fx"])
    # a node some other computation also reads still runs in eager, and so do its inputs
    absent = {c for c in cone if c in facts.fg.dag}
    changed = True
    while changed:
        changed = False
        for c in sorted(absent):
            if any(u not in absent and u not in sdpa for u in facts.fg.dag.successors(c)):
                absent.discard(c)
                changed = True
    return {c for c in absent if c in facts.kind}


def eager_mask_share(
    facts: GraphFacts, compiled: dict[str, SdpaCall], eager: dict[str, SdpaCall]
) -> dict[str, float]:
    """{node: share} for the nodes building an SDPA call's mask at the graph's mask size where eager
    passes a smaller mask (the eager probe's record): eager runs those kernels at its own mask's
    size, `share` of the graph's elements. T5 under torch 2.11's compile adds the batch-wide
    attention mask to its position bias, (16, 8, 256, 256), where eager passes the bias alone,
    (1, 8, 256, 256): the graph's `where` and its permuted `contiguous()` copy run 16x smaller."""
    share: dict[str, float] = {}
    for c in sorted(compiled):
        big, small = compiled[c].mask, eager[c].mask
        if big is None or small is None or math.prod(small.shape) >= math.prod(big.shape):
            continue
        ratio = math.prod(small.shape) / math.prod(big.shape)
        for n in sorted(mask_cone(facts.fg.dag.nodes[c]["fx"])):
            if n in facts.kind and tuple(facts.shape.get(n) or ()) == tuple(big.shape):
                share[n] = min(share.get(n, 1.0), ratio)
    return share


def eager_kernels(facts: GraphFacts, absent: set[str] | None = None) -> list[set[str]]:
    """The compute nodes of each kernel eager launches: the nodes a decomposition made from one
    ATen call (same `original_aten` op and same `from_node` origin) form one kernel, so F.gelu
    is one launch while torch.matmul's copies and bmm stay separate launches. The clone that
    stands for an eval-mode dropout is no kernel: eager's dropout returns its input; nor are
    the `absent` nodes (eager_absent)."""
    units: dict[tuple, list[str]] = {}
    for c in facts.kind:  # graph order, so that units and kernels come out in graph order
        meta = facts.fg.dag.nodes[c]["fx"].meta
        if _eager_identity(facts.fg.dag.nodes[c]["fx"]) or (absent and c in absent):
            continue
        origin, aten = meta.get("from_node") or [], meta.get("original_aten")
        key = (getattr(origin[-1], "name", None), str(aten)) if origin and aten is not None else (c,)
        units.setdefault(key, []).append(c)
    # one call's nodes are connected: torch.matmul's two operand copies are two kernels
    kernels = []
    for unit in units.values():
        links = nx.Graph()
        links.add_nodes_from(unit)
        links.add_edges_from(
            (c, facts.home[v]) for c in unit for _p, v in facts.reads[c] if facts.home[v] in links
        )
        kernels.extend(set(part) for part in nx.connected_components(links))
    return kernels


def math_attention_cost(call: SdpaCall, device: Device) -> Cost:
    """SDPA's math path: its kernels (attention.math_parts), each priced on the roofline."""
    parts = math_parts(call)
    return Cost(
        len(parts),
        sum(p.bytes for p in parts),
        sum(p.flops for p in parts),
        sum(device.time_us(p.bytes, p.flops, p.dtype) for p in parts),
    )


def fused_attention_cost(call: SdpaCall, device: Device) -> Cost:
    """One fused attention kernel (flash / memory-efficient), at the rate such kernels reach."""
    nbytes, flops = fused_work(call)
    memory = nbytes / (device.bandwidth_gbs * 1e3)
    # the table's rate was fit to flash kernels (no mask); a masked call runs the memory-efficient
    # kernel, measured at 0.20-0.34 of the dense rate on the H200 (T5's, GPT-2's and LLaMA's)
    flash = call.mask is None and device.efficiency is not None
    rate = device.efficiency.attention if flash and device.efficiency.attention else 0.0
    if flash and call.is_causal and device.efficiency.attention_causal:
        rate = device.efficiency.attention_causal
    compute = flops / (
        device.tflops(str(call.dtype).removeprefix("torch.")) * (rate or FUSED_ATTENTION_EFFICIENCY) * 1e6
    )
    return Cost(1, nbytes, flops, max(memory, compute) + device.launch_us)


def sdpa_calls(facts: GraphFacts) -> dict[str, SdpaCall]:
    """The graph's SDPA nodes and the calls they make."""
    calls = {}
    for c in facts.kind:
        call = sdpa_call(facts.fg.dag.nodes[c]["fx"])
        if call is not None:
            calls[c] = call
    return calls


def nchw_conv_extra(facts: GraphFacts, unit: set[str], device: Device, compiled: bool = False) -> Cost:
    """The kernels eager runs around a convolution it runs on NCHW tensors, besides the conv.

    cuDNN's convolution kernels on sm80+ GPUs work on NHWC data: given NCHW tensors it converts
    the input and the weight to NHWC and the output back, three kernels that each read and
    write their tensor (`nchwToNhwcKernel`, `nhwcToNchwKernel`), and PyTorch adds the bias in a
    kernel of its own. A 1x1 image (squeeze-excite convs after a global pool) is the same in both
    layouts and is not converted. A depthwise conv runs PyTorch's own NCHW kernel (cuDNN takes
    only fp16 ones) with its bias: one thread per output reading its k x k taps, untiled, so it
    moves taps x outputs elements where the roofline counts the input once (measured on the H100,
    bf16 3x3 over 64x256x56x56: 497 µs; this prices it at 342 µs, the roofline at 70 µs).
    Measured on the H100 (torch 2.11, bf16), eager kernels per call less the cost model's count
    before this: ResNet-50 347 - 174 = 173 for 53 convs (159 here), ViT-B/16 4 for its biased
    patch conv (4), EfficientNet-B0 150 (131), MobileNetV3 121 (110), ConvNeXt-T 27 (16); the
    channels_last convs the layout pass plans (graph/layout.py) need none of them. `compiled`: the
    convolution as the compiled graph runs it (its layout from the graph's own tensors, its bias
    peeled off): a compiled graph whose convolutions stay NCHW (grouped ones, by Inductor's
    layout rule) pays the same conversions."""
    out = Cost()
    for c in unit:
        fx = facts.fg.dag.nodes[c]["fx"]
        if fx.target is not torch.ops.aten.convolution.default:
            continue
        fmt, bias, copied = _compiled_layout(fx) if compiled else conv_eager_layout(fx)
        x, w, y = (n.meta.get("val") if isinstance(n, torch.fx.Node) else None for n in (*fx.args[:2], fx))
        if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (x, w, y)):
            continue
        stem = _stem_kind(fx, x, w, device)
        if fmt != "contiguous":  # cuDNN in channels_last: the operands not in it are copied first
            copies = [2 * t.numel() * t.element_size() for i, t in enumerate((x, w)) if i in copied]
            out = (
                out
                + _bias_kernel(y, bias, device)
                + Cost(len(copies), sum(copies), 0, sum(map(device.time_us, copies)))
            )
            if stem == "tensor-core":  # cuDNN pads the image's few channels first
                moved = 2 * x.numel() * x.element_size()
                out = out + Cost(
                    1, moved, 0, device.time_us(moved, memory_us=device.stem_copy_us(moved, True))
                )
            continue
        if stem == "cuda-core":  # cuDNN's few-channel kernels read NCHW data as it is
            out = out + _bias_kernel(y, bias, device)
            continue
        if fx.args[8] > 1 and w.shape[1] == 1:  # depthwise: PyTorch's NCHW kernel, untiled
            if device.depthwise_us(1.0, w.shape[2], "contiguous") is not None:
                continue  # priced at the rate swept for that kernel (_shaped_compute_us)
            taps = y.numel() * w.shape[2] * w.shape[3] * x.element_size()
            extra = max(taps - x.numel() * x.element_size(), 0)
            out = out + Cost(0, extra, 0, extra / (device.bandwidth_gbs * 1e3))
            continue
        moved = [2 * t.numel() * t.element_size() for t in (x, w, y)] if x.shape[2] * x.shape[3] > 1 else []
        # a tensor-core stem's image converts at the table's rate for so few channels
        rates = [device.stem_copy_us(moved[0]) if stem and i == 0 else None for i in range(len(moved))]
        out = (
            out
            + _bias_kernel(y, bias, device)
            + Cost(
                len(moved),
                sum(moved),
                0,
                sum(device.time_us(m, memory_us=r) for m, r in zip(moved, rates, strict=True)),
            )
        )
    return out


def _stem_kind(conv: torch.fx.Node, x: torch.Tensor, w: torch.Tensor, device: Device) -> str | None:
    """ "tensor-core" or "cuda-core": the cuDNN kernel family (`stem_family`) of an image stem, a
    dense convolution over an image larger than 1x1, where the table prices stems' copies
    (Device.stem_copy_us); None otherwise."""
    if device.stem_copy_us(1.0) is None or conv.args[8] != 1 or x.shape[2] * x.shape[3] <= 1:
        return None
    return stem_family(w.shape[1], w.shape[2] * w.shape[3])


def _bias_kernel(y: torch.Tensor, bias: bool, device: Device) -> Cost:
    """The kernel eager adds a convolution's bias in (none without one): a (C, 1, 1) operand
    broadcast over the output, which PyTorch runs unvectorised (Device.strided_us)."""
    if not bias:
        return Cost()
    moved = 2 * y.numel() * y.element_size()
    return Cost(1, moved, 0, device.time_us(moved, memory_us=device.strided_us(moved)))


def _compiled_layout(conv: torch.fx.Node) -> tuple[str, bool, tuple[int, ...]]:
    """conv_eager_layout's answer for a convolution of the compiled graph: the layout its own
    input and weight have there (the layout pass made the copies explicit nodes)."""
    vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in conv.args[:2]]
    cl = any(channels_last(t) for t in vals)
    return ("channels_last" if cl else "contiguous"), conv.args[2] is not None, ()


def _priced(
    facts: GraphFacts,
    nodes: set[str],
    device: Device,
    flops: dict[str, int],
    attention: dict[str, SdpaCall],
    launches: int = 1,
) -> Cost:
    """kernel_cost, except that an SDPA node costs the kernel(s) its call runs on a GPU: the sum
    of `_priced_by_class`, so that a model's classes always add up to its total."""
    return sum(_priced_by_class(facts, nodes, device, flops, attention, launches).values(), Cost())


def _eager_units(
    facts: GraphFacts,
    device: Device,
    flops: dict[str, int],
    compiled: dict[str, SdpaCall],
    eager_calls: dict[str, SdpaCall],
):
    """(kernel, {class: Cost}) for each kernel eager launches: its ops priced as eager runs them,
    the layout conversions around an NCHW convolution counted as "other"."""
    share = eager_mask_share(facts, compiled, eager_calls)
    for unit in eager_kernels(facts, eager_absent(facts, compiled, eager_calls)):
        parts = _priced_by_class(facts, unit, device, flops, eager_calls, eager=True)
        k = max((share.get(c, 1.0) for c in unit), default=1.0)
        if k < 1:  # a mask kernel eager runs on its own, smaller mask: its work shrinks, not its launch
            launch = device.launch_us
            parts = {
                cls: Cost(
                    v.launches,
                    v.bytes * k,
                    v.flops * k,
                    v.launches * launch + (v.time_us - v.launches * launch) * k,
                )
                for cls, v in parts.items()
            }
        extra = nchw_conv_extra(facts, unit, device)
        if extra.launches:
            parts["other"] = parts.get("other", Cost()) + extra
        yield unit, parts


def graph_cost(plan: FusionPlan, device: Device = DEFAULT) -> GraphCost:
    """Eager vs planned cost of one graph, per group and in total (per run of the graph).

    SDPA is priced as the kernel a CUDA GPU picks for it (attention.py): under compile for the
    traced call, in eager for the call as eager code makes it (`eager_call`: as the eager probe
    recorded it, graph/eager_probe.py), without the mask kernels eager does not run."""
    facts = GraphFacts(plan.graph)
    flops = {c: node_flops(facts, c) for c in facts.kind}
    compiled = sdpa_calls(facts)
    eager_calls = {c: eager_call(k, plan.graph.eager_sdpa) for c, k in compiled.items()}
    home = plan.group_of()
    eager_by_group: dict[int, Cost] = {}
    for unit, parts in _eager_units(facts, device, flops, compiled, eager_calls):
        gid = home.get(min(unit, key=facts.order.get), -1)
        eager_by_group[gid] = eager_by_group.get(gid, Cost()) + sum(parts.values(), Cost())
    groups = tuple(
        GroupCost(
            g.id,
            g.kind,
            eager_by_group.get(g.id, Cost()),
            _priced(facts, set(g.compute_nodes), device, flops, compiled, g.launches),
        )
        for g in plan.groups
    )
    eager = sum(eager_by_group.values(), Cost())
    fused = sum((g.fused for g in groups), Cost())
    return GraphCost(plan.graph.name, plan.graph.calls, device.name, eager, fused, groups)


def model_cost(plans: list[FusionPlan], device: Device = DEFAULT) -> ModelCost:
    """Cost of a model made of several graphs, each weighted by its runs per call."""
    return ModelCost(device.name, tuple(graph_cost(p, device) for p in plans))


# -- where the time goes, by kind of kernel -------------------------------------------------------
# The classes a GPU profile's kernels fall into (bench/predict_accuracy.py names measured kernels
# the same way), so that a prediction's error can be traced to the kernels it misprices.
KERNEL_CLASSES = ("gemm", "conv", "attention", "other")


def _kernel_class(facts: GraphFacts, nodes: set[str]) -> str:
    kinds = {facts.kind[c] for c in nodes}
    return "conv" if "conv" in kinds else "gemm" if "matmul" in kinds else "other"


def _priced_by_class(
    facts: GraphFacts,
    nodes: set[str],
    device: Device,
    flops: dict[str, int],
    attention: dict[str, SdpaCall],
    launches: int = 1,
    eager: bool = False,
) -> dict[str, Cost]:
    """_priced, split by kernel class: a fused SDPA kernel is "attention"; the math path's two
    matmuls are "gemm" and its casts and softmax "other"."""
    sdpa = nodes & set(attention)
    out: dict[str, Cost] = {}
    if nodes - sdpa:
        rest = nodes - sdpa
        out[_kernel_class(facts, rest)] = kernel_cost(facts, rest, device, flops, launches, eager)
        extra = Cost() if eager else nchw_conv_extra(facts, rest, device, compiled=True)
        if extra.launches or extra.time_us:  # the conversions cuDNN runs around an NCHW conv
            out["other"] = out.get("other", Cost()) + extra
    for c in sorted(sdpa):
        call = attention[c]
        if choose_backend(call).fused:
            out["attention"] = out.get("attention", Cost()) + fused_attention_cost(call, device)
            continue
        for part in math_parts(call):
            cls = "gemm" if "@" in part.name else "other"
            priced = Cost(1, part.bytes, part.flops, device.time_us(part.bytes, part.flops, part.dtype))
            out[cls] = out.get(cls, Cost()) + priced
    return out


def cost_by_class(plans: list[FusionPlan], device: Device = DEFAULT) -> dict[str, dict[str, Cost]]:
    """{"eager" | "fused": {kernel class: Cost}} of a model (graphs weighted by their calls), with
    the same prices as model_cost: each side's classes sum to its total."""
    sides: dict[str, dict[str, Cost]] = {"eager": {}, "fused": {}}

    def add(side: str, parts: dict[str, Cost], calls: int) -> None:
        for cls, cost in parts.items():
            sides[side][cls] = sides[side].get(cls, Cost()) + cost.scaled(calls)

    for p in plans:
        facts = GraphFacts(p.graph)
        flops = {c: node_flops(facts, c) for c in facts.kind}
        compiled = sdpa_calls(facts)
        eager_calls = {c: eager_call(k, p.graph.eager_sdpa) for c, k in compiled.items()}
        for _unit, parts in _eager_units(facts, device, flops, compiled, eager_calls):
            add("eager", parts, p.graph.calls)
        for g in p.groups:
            add(
                "fused",
                _priced_by_class(facts, set(g.compute_nodes), device, flops, compiled, g.launches),
                p.graph.calls,
            )
    return {side: {c: parts[c] for c in KERNEL_CLASSES if c in parts} for side, parts in sides.items()}
