"""Lower one fusion group of ATen FX nodes to a kernel IR: loads, math, reductions, stores.

The kernel iterates over one *space* S (a shape). Every value the group computes is a tile
over S: each of its dimensions is mapped onto a dimension of S, or is a broadcast (size-1)
dimension. Loads read a tensor through its strides laid onto S (stride 0 where it
broadcasts), so broadcasting and non-contiguous inputs cost nothing extra. A reduction
group has a set R of reduced dims of S; all its reductions reduce exactly R, and a value
"depends on r" when it varies along R. Reductions count *stages*: a value computed from
k chained reductions is at stage k (softmax: amax at 1, sum at 2), which is how the
looped codegen knows how many passes over R it needs.

A ``max_pool2d_with_indices`` whose indices nothing reads is a *window* value over the
pool's output space: the group's nodes that only feed it (its prologue, e.g. ReLU) are
lowered separately over the pool's input space and evaluated once per window tap.

Whatever does not fit (an unknown op, a second reduction axis, a float64 tensor, symbolic
shapes...) raises :class:`Unsupported`, and the group runs through ATen instead.
"""

from __future__ import annotations

import keyword
import math
import operator
from dataclasses import dataclass, field

import torch
import torch.fx

from fuselint.backend.ops import COMPUTE_TYPES, REDUCTIONS, TL_DTYPES, VIEWS, literal, lowering_for
from fuselint.graph.op_facts import GENERATED_WINDOWS

# A tensor moving at least 1/this of the heaviest one's elements decides the layout too.
MIXED_LAYOUT_SHARE = 8
# The longest dim a transposing tile walks on its second axis (register budget).
MAX_TILE = 256


class Unsupported(Exception):
    """The group cannot become a generated kernel; it runs through ATen."""


@dataclass(eq=False)
class Value:
    """One tile-valued quantity of the kernel."""

    name: str
    kind: str  # "load" | "math" | "reduce" | "const" | "index" | "window" | "gather"
    ctype: str  # "f" (computed in fp32), "b" (bool), "i" (integer)
    dims: frozenset  # the dims of S the value varies along
    stage: int  # chained reductions it depends on
    args: tuple = ()
    expr: str = ""  # math: format string over the args' variable names; const: the literal
    reduce_op: str = ""  # "sum" | "max" | "min"
    input_index: int = -1  # load: which kernel input
    strides: tuple = ()  # load: element stride along each dim of S
    dtype: torch.dtype | None = None  # load: the tensor's dtype
    # load: (dim of S, start, end): the tensor covers [start, end) of that dim (cat, pad);
    # it is read at index - start and masked outside. index: the dim whose index it is.
    shifts: tuple = ()
    dim: int = -1
    window: Window | None = None  # window: the pooled source and the window's geometry
    # gather: a row of input `input_index` picked by args[0] (an integer value), read along
    # `strides` inside the row: (row stride, number of rows)
    rows: tuple = ()
    # reduce: for a variance's sum of squared deviations, the mean they deviate from (sum / n),
    # which lets a split reduction combine chunks by Chan's formula
    mean: Value | None = None


@dataclass(eq=False)
class Window:
    """max over a kh x kw window of a source computed per tap (max_pool2d values).

    The source is a small program over the pool's *input* space (its loads carry strides
    along those dims): its pointwise prologue, e.g. ReLU, runs on every tap it reads, so
    the prologue's full-size result is never written. Taps outside the input are skipped
    (padding, ceil_mode), as in ATen's kernel.
    """

    source: Value  # the value pooled, over the input space
    values: list[Value]  # the source's program (loads and math over the input space)
    in_shape: tuple[int, ...]  # (..., H, W) of the pooled tensor
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Store:
    value: Value
    output_index: int  # -1 for a store into an input
    strides: tuple[int, ...]  # along each dim of S (0 where the output broadcasts)
    dtype: torch.dtype
    # `copy_` into a graph input (BatchNorm's running statistics): the input it writes
    input_index: int = -1

    @property
    def pointer(self) -> str:
        return f"out{self.output_index}" if self.input_index < 0 else f"in{self.input_index}"


@dataclass
class KernelIR:
    """What one generated kernel computes."""

    space: tuple[int, ...]
    rdims: tuple[int, ...]  # reduced dims of S (empty for a pointwise kernel)
    inputs: tuple[str, ...]
    input_meta: tuple[TensorMeta, ...]
    outputs: tuple[str, ...]
    output_meta: tuple[TensorMeta, ...]
    values: list[Value]
    stores: list[Store]
    fused: tuple[str, ...]  # the ATen nodes, one readable line each
    device: torch.device
    op_names: tuple[str, ...] = field(default=())
    # The order (outer to inner) in which program offsets walk the non-reduced dims: the
    # memory order of the tensor that moves the most bytes, so that its accesses coalesce.
    xorder: tuple[int, ...] | None = None
    # The dim of S along which that heaviest stream is contiguous (a reduction over it reads
    # rows; over other dims, columns).
    contiguous_dim: int | None = None
    # A pointwise kernel whose big tensors are laid out differently (NCHW beside channels_last)
    # walks this dim on a second tile axis: each tensor then coalesces along one of the axes.
    tile_dim: int | None = None

    @property
    def xdims(self) -> tuple[int, ...]:
        if self.xorder is not None:
            return self.xorder
        return tuple(d for d in range(len(self.space)) if d not in self.ydims)

    @property
    def ydims(self) -> tuple[int, ...]:
        """The dims on a program's second tile axis: the reduced dims, or the tile dim."""
        return self.rdims if self.rdims else ((self.tile_dim,) if self.tile_dim is not None else ())

    @property
    def ynumel(self) -> int:
        return math.prod(self.space[d] for d in self.ydims)

    @property
    def xnumel(self) -> int:
        return math.prod(self.space[d] for d in self.xdims)

    @property
    def rnumel(self) -> int:
        return math.prod(self.space[d] for d in self.rdims)

    @property
    def stages(self) -> int:
        return max((v.stage for v in self.values if v.kind == "reduce"), default=0)

    @property
    def reductions(self) -> list[Value]:
        """The reduce values, by stage (the order of a split kernel's partial results)."""
        return sorted((v for v in self.values if v.kind == "reduce"), key=lambda v: v.stage)

    @property
    def late_stores(self) -> list[Store]:
        """Full-size stores that need a reduction's result (normalisation)."""
        return [s for s in self.stores if s.value.stage > 0 and any(s.strides[d] for d in self.rdims)]

    @property
    def splittable(self) -> bool:
        """Whether chunks of the reduced extent can be reduced apart and combined after: every
        reduction reads no other reduction's result, except a variance's sum of squares, which
        reads only its mean (chunks combine by Chan's formula). Full-size stores that need a
        reduction's result run in a third pass, over chunks again."""
        if not self.rdims or self.tile_dim is not None:
            return False
        for v in self.reductions:
            if v.stage == 1:
                continue
            mean = v.mean
            if v.stage != 2 or mean is None or not _reads_reductions_only_through(v.args[0], mean):
                return False
            if mean.args[0].kind != "reduce" or mean.args[0].reduce_op != "sum" or mean.args[0].stage != 1:
                return False
        return True


_RESERVED = frozenset(
    {"tl", "triton", "pid", "xoffs", "xmask", "roffs", "rmask", "mask", "r0", "XBLOCK", "RBLOCK"}
    | {"float", "int", "range", "min", "max", "sum", "abs", "len", "print"}
    | set(keyword.kwlist)
)


def static_shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    """The static shape of the tensor `node` computes; None for other values."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not all(isinstance(s, int) for s in val.shape):
        return None
    return tuple(val.shape)


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """`shape` broadcasts to `to` (right-aligned; each dim equal or 1)."""
    lead = len(to) - len(shape)
    return lead >= 0 and all(s in (1, to[lead + j]) for j, s in enumerate(shape))


def _concrete_shape(val: object) -> tuple[int, ...]:
    if not isinstance(val, torch.Tensor):
        raise Unsupported("value is not a tensor")
    shape = []
    for s in val.shape:
        if not isinstance(s, int):
            raise Unsupported("symbolic shape")
        shape.append(s)
    for s in val.stride():
        if not isinstance(s, int):
            raise Unsupported("symbolic stride")
    return tuple(shape)


def tensor_meta(node: torch.fx.Node) -> TensorMeta:
    val = node.meta.get("val")
    shape = _concrete_shape(val)
    if val.dtype not in TL_DTYPES:
        raise Unsupported(f"dtype {val.dtype}")
    if val.layout != torch.strided:
        raise Unsupported("non-strided layout")
    return TensorMeta(shape, tuple(int(s) for s in val.stride()), val.dtype)


def bind(node: torch.fx.Node) -> dict:
    """The node's arguments by schema name, defaults filled in, in schema order."""
    schema = node.target._schema
    bound = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            bound[arg.name] = None
    return bound


def describe(node: torch.fx.Node) -> str:
    """`name = aten.op(arg, ...)`: one line of the generated kernel's header."""

    def fmt(a: object) -> str:
        if isinstance(a, torch.fx.Node):
            return a.name
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in a) + "]"
        return repr(a)

    parts = [fmt(a) for a in node.args] + [f"{k}={fmt(v)}" for k, v in node.kwargs.items()]
    target = "getitem" if node.target is operator.getitem else str(node.target)
    return f"{node.name} = {target}({', '.join(parts)})"


def _reduced_dims(dims: object, ndim: int) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({d % ndim for d in dims}))


class Lowering:
    """Builds the KernelIR of one group: nodes in topological order, inputs, outputs."""

    def __init__(
        self,
        nodes: list[torch.fx.Node],
        inputs: list[torch.fx.Node],
        outputs: list[torch.fx.Node],
        used_names: set[str] | None = None,
    ) -> None:
        self.all_nodes = nodes
        self.prologue, nodes = _split_window(nodes, outputs)
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.input_index = {n.name: i for i, n in enumerate(inputs)}
        self.env: dict[str, tuple[object, object]] = {}
        self.values: list[Value] = []
        self.loads: dict[tuple, Value] = {}
        self.used_names: set[str] = set() if used_names is None else used_names
        self.current_ctype = "f"
        self.current_packet = ""
        self.device = self._device()
        self.space, self.rdims = self._choose_space()
        self.rset = frozenset(self.rdims)
        self.hints = self._dim_hints()
        self.cat_pieces: frozenset[str] = frozenset()
        self.copies: list[tuple[torch.fx.Node, Value, tuple]] = []  # (input, value, its map)

    # -- helpers the op table calls -------------------------------------------------------
    def unsupported(self, why: str) -> None:
        raise Unsupported(why)

    def ctype_of(self, x: object) -> str:
        if isinstance(x, Value):
            return x.ctype
        if isinstance(x, bool):
            return "b"
        if isinstance(x, int):
            return "i"
        if isinstance(x, float):
            return "f"
        raise Unsupported(f"operand {x!r}")

    def ctype_for(self, dtype: torch.dtype) -> str:
        if dtype not in COMPUTE_TYPES:
            raise Unsupported(f"dtype {dtype}")
        return COMPUTE_TYPES[dtype]

    def tl_dtype(self, dtype: torch.dtype) -> str:
        return TL_DTYPES[dtype]

    def literal(self, value: object, ctype: str | None = None) -> Value:
        if not isinstance(value, (int, float, bool)):
            raise Unsupported(f"constant {value!r}")
        ctype = ctype or self.current_ctype
        return Value("const", "const", ctype, frozenset(), 0, expr=literal(value, ctype))

    def math(self, expr: str, *operands: object) -> Value:
        vals = [o for o in operands if isinstance(o, Value)]
        kinds = {self.ctype_of(o) for o in operands}
        float_ctx = "f" in kinds or self.current_ctype == "f"
        args = []
        for o in operands:
            if isinstance(o, Value):
                args.append(o)
            else:
                ctype = "f" if (float_ctx and not isinstance(o, bool)) else self.ctype_of(o)
                args.append(self.literal(o, ctype))
        ctype = "f" if "f" in kinds else ("i" if "i" in kinds else "b")
        v = Value(
            self._fresh("tmp"),
            "math",
            ctype,
            frozenset().union(*[a.dims for a in vals]),
            max((a.stage for a in vals), default=0),
            args=tuple(args),
            expr=expr,
        )
        self.values.append(v)
        return v

    # -- building -------------------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        name = base if base not in _RESERVED else base + "_v"
        if name.startswith(("in_", "out_", "acc_")):
            name = "v_" + name
        candidate, i = name, 1
        while candidate in self.used_names:
            candidate = f"{name}_{i}"
            i += 1
        self.used_names.add(candidate)
        return candidate

    def _device(self) -> torch.device:
        for n in self.nodes:
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor):
                return val.device
        raise Unsupported("no tensor computed")

    def _choose_space(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        for n in self.nodes:
            packet = getattr(getattr(n.target, "overloadpacket", None), "__name__", "")
            if packet in REDUCTIONS:
                src = n.args[0]
                if not isinstance(src, torch.fx.Node):
                    raise Unsupported("reduction of a non-tensor")
                space = _concrete_shape(src.meta.get("val"))
                if not space:
                    raise Unsupported("reduction of a 0-d tensor")
                dims = _reduced_dims(bind(n).get("dim"), len(space))
                rdims = tuple(d for d in dims if space[d] > 1)
                if math.prod(space) == 0:
                    raise Unsupported("empty tensor")
                return space, rdims
        best: tuple[int, ...] | None = None
        for n in self.nodes:
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor):
                shape = _concrete_shape(val)
                if best is None or math.prod(shape) > math.prod(best):
                    best = shape
        if best is None or math.prod(best) == 0:
            raise Unsupported("empty tensor")
        return best, ()

    def _dim_hints(self) -> dict[str, tuple]:
        """Dims of S for small values that do not right-align with S but whose readers place
        them: BatchNorm's per-channel scale, shape (C,), is read through unsqueezes as (C, 1, 1)
        by (N, C, H, W) math, so its dim 0 is S's dim 1; and values of any size read through a
        permute, which take the dims the permute gives them. Found backwards from the readers
        (the last reader first), through views that only add or drop size-1 dims."""
        hints: dict[str, tuple] = {}
        members = {n.name for n in self.nodes}
        for node in reversed(self.nodes):
            shape = static_shape(node)
            if shape is None:
                continue
            whole = math.prod(shape) >= math.prod(self.space)
            for user in node.users:
                if user.name not in members:
                    continue
                packet = getattr(getattr(user.target, "overloadpacket", None), "__name__", "")
                if whole and packet != "permute":
                    continue
                umap = hints.get(user.name) or self._aligned_map(static_shape(user))
                if umap is None:
                    continue
                ushape = static_shape(user)
                if packet == "permute":
                    # a value computed where its permuted reader needs it: ConvNeXt's
                    # (conv + bias).permute(0, 2, 3, 1) feeding LayerNorm over channels
                    dims = [None] * len(shape)
                    for i, src in enumerate(user.args[1]):
                        dims[src % len(shape)] = umap[i]
                    hints[node.name] = tuple(None if s == 1 else m for s, m in zip(shape, dims, strict=True))
                    break
                if packet == "embedding" and user.args[1] is node and len(shape) == len(ushape) - 1:
                    # indices computed in the kernel (BERT's token types, gathered by position):
                    # each is read at the positions of the row it picks
                    hints[node.name] = tuple(
                        None if s == 1 else m for s, m in zip(shape, umap[:-1], strict=True)
                    )
                    break
                if packet == "expand" and len(shape) <= len(ushape):
                    # broadcast along the reader's dims where this value has size 1
                    tail = umap[len(ushape) - len(shape) :]
                    hints[node.name] = tuple(None if s == 1 else m for s, m in zip(shape, tail, strict=True))
                    break
                if packet in ("unsqueeze", "squeeze", "view", "reshape", "_unsafe_view"):
                    if [s for s in shape if s != 1] != [s for s in ushape if s != 1]:
                        continue
                    kept = iter(m for s, m in zip(ushape, umap, strict=True) if s != 1)
                    hints[node.name] = tuple(None if s == 1 else next(kept) for s in shape)
                    break
                if packet not in VIEWS and len(shape) <= len(ushape):
                    tail = umap[len(ushape) - len(shape) :]
                    if all(s == 1 or s == ushape[len(ushape) - len(shape) + j] for j, s in enumerate(shape)):
                        hints[node.name] = tuple(
                            None if s == 1 else m for s, m in zip(shape, tail, strict=True)
                        )
                        break
        return hints

    def _aligned_map(self, shape: tuple[int, ...] | None) -> tuple | None:
        """`shape` right-aligned onto S (size-1 dims broadcast), or None when it does not fit."""
        if shape is None or len(shape) > len(self.space):
            return None
        k = len(self.space) - len(shape)
        if any(s != 1 and s != self.space[k + j] for j, s in enumerate(shape)):
            return None
        return tuple(None if s == 1 else k + j for j, s in enumerate(shape))

    def _identity_map(self) -> tuple:
        return tuple(d if self.space[d] != 1 else None for d in range(len(self.space)))

    def _default_dim(self, ndim: int, i: int, size: int) -> int | None:
        if size == 1:
            return None
        d = len(self.space) - ndim + i
        if d < 0 or self.space[d] != size:
            raise Unsupported(f"shape does not broadcast onto the kernel space {self.space}")
        return d

    def _row_map(self, shape: tuple[int, ...]) -> tuple:
        """`shape` laid on the rows (the kept dims) of a reduction, in order: a per-row value
        computed from per-row inputs alone (BatchNorm's backward squares its saved inverse std,
        shape (C,), beside sums over N, H and W) has no operand or reader that places it."""
        rows = [d for d in range(len(self.space)) if d not in self.rset and self.space[d] > 1]
        if not self.rdims or [s for s in shape if s != 1] != [self.space[d] for d in rows]:
            raise Unsupported(f"shape does not broadcast onto the kernel space {self.space}")
        kept = iter(rows)
        return tuple(None if s == 1 else next(kept) for s in shape)

    def _out_map(
        self, out_shape: tuple[int, ...], tensor_args: list[torch.fx.Node], hint: tuple | None = None
    ) -> tuple:
        k = len(out_shape)
        out_map = []
        rows = None  # out_shape on the rows of a reduction, when it does not right-align
        for i, size in enumerate(out_shape):
            if size == 1:
                out_map.append(None)
                continue
            found = set()
            for a in tensor_args:
                if a.name in self.env:
                    amap = self.env[a.name][1]
                    if not isinstance(amap, tuple) or (amap and isinstance(amap[0], tuple)):
                        raise Unsupported("tuple operand")
                    j = i - (k - len(amap))
                    if j >= 0 and amap[j] is not None:
                        found.add(amap[j])
            if len(found) > 1:
                raise Unsupported("operands disagree on dims")
            if found:
                d = found.pop()
            elif hint is not None and hint[i] is not None:
                d = hint[i]
            else:
                try:
                    d = self._default_dim(k, i, size)
                except Unsupported:
                    if rows is None:
                        rows = self._row_map(out_shape)
                    d = rows[i]
            if self.space[d] != size:
                raise Unsupported("size mismatch")
            out_map.append(d)
        if len({d for d in out_map if d is not None}) != sum(d is not None for d in out_map):
            raise Unsupported("two dims of one value map onto one kernel dim")
        return tuple(out_map)

    def _load(self, node: torch.fx.Node, smap: tuple, shifts: tuple = ()) -> Value:
        key = (node.name, smap, shifts)
        if key in self.loads:
            return self.loads[key]
        meta = tensor_meta(node)
        if node.meta["val"].device != self.device:
            raise Unsupported("input on another device")
        strides = self._space_strides(smap, meta.stride)
        dims = frozenset(d for d, s in enumerate(strides) if s != 0 and self.space[d] > 1)
        dims |= {d for d, _, _ in shifts}
        v = Value(
            self._fresh(node.name),
            "load",
            self.ctype_for(meta.dtype),
            dims,
            0,
            input_index=self.input_index[node.name],
            strides=tuple(strides),
            dtype=meta.dtype,
            shifts=shifts,
        )
        self.loads[key] = v
        self.values.append(v)
        return v

    def _operand(self, a: object, out_shape: tuple[int, ...], out_map: tuple) -> object:
        if not isinstance(a, torch.fx.Node):
            return a
        if a.name in self.env:
            val = self.env[a.name][0]
            if not isinstance(val, Value):
                raise Unsupported("tuple used as a tensor")
            return val
        if a.name not in self.input_index:
            raise Unsupported(f"{a.name} is neither computed here nor an input")
        in_shape = _concrete_shape(a.meta.get("val"))
        k, ka = len(out_shape), len(in_shape)
        if ka > k:
            raise Unsupported("operand has more dims than the result")
        in_map = []
        for j, size in enumerate(in_shape):
            if size == 1:
                in_map.append(None)
            elif size != out_shape[k - ka + j]:
                raise Unsupported("operand does not broadcast")
            else:
                in_map.append(out_map[k - ka + j])
        return self._load(a, tuple(in_map))

    def _set(self, node: torch.fx.Node, value: Value, smap: tuple) -> None:
        if value.kind in ("math", "reduce") and not value.name.startswith(node.name):
            value.name = self._fresh(node.name)
        self.env[node.name] = (value, smap)

    def _lower_node(self, node: torch.fx.Node) -> None:
        if node.op != "call_function":
            raise Unsupported(f"{node.op} node")
        if node.target is operator.getitem:
            src, idx = node.args
            vals, maps = self.env[src.name]
            if not isinstance(vals, tuple) or vals[idx] is None:
                raise Unsupported("getitem of a tensor, or of argmax indices")
            self.env[node.name] = (vals[idx], maps[idx])
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise Unsupported(f"target {node.target}")
        packet = node.target.overloadpacket.__name__
        self.current_packet = packet
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            self.current_ctype = self.ctype_for(val.dtype)
            _concrete_shape(val)
        if packet in VIEWS:
            self._view(node, packet)
        elif packet in ("cat", "constant_pad_nd"):
            self._placement(node, packet)
        elif packet == "iota":
            self._iota(node)
        elif packet == "philox_rand":
            self._rand(node)
        elif packet == "embedding":
            self._embedding(node)
        elif packet == "copy_":
            self._copy_into(node)
        elif packet == "gather":
            self._gather(node)
        elif packet in REDUCTIONS:
            self._reduce(node, packet)
        elif packet in GENERATED_WINDOWS:
            self._window(node)
        else:
            self._pointwise(node)

    def _copy_into(self, node: torch.fx.Node) -> None:
        """copy_(dst, src) into a graph input that nothing else in the graph reads: the kernel
        stores src into dst itself (a training graph's update of BatchNorm's running statistics,
        which ATen would copy with a launch of its own per buffer)."""
        dst, src = node.args[0], node.args[1]
        if not isinstance(dst, torch.fx.Node) or dst.op != "placeholder" or dst.name not in self.input_index:
            raise Unsupported("copy_ into a value that is not a graph input")
        members = {n.name for n in self.all_nodes}
        if any(u.name not in members for u in (*dst.users, *node.users)):
            raise Unsupported("copy_ into an input that other kernels read")
        shape = _concrete_shape(dst.meta.get("val"))
        if not isinstance(src, torch.fx.Node) or static_shape(src) != shape:
            raise Unsupported("copy_ that broadcasts")
        smap = self._out_map(shape, [src], self.hints.get(node.name))
        value = self._operand(src, shape, smap)
        self.copies.append((dst, value, smap))
        self.env[node.name] = (value, smap)

    def _pointwise(self, node: torch.fx.Node) -> None:
        fn = lowering_for(node.target)
        if fn is None:
            raise Unsupported(f"no lowering for {node.target}")
        bound = bind(node)
        out_shape = _concrete_shape(node.meta.get("val"))
        tensor_args = [a for a in bound.values() if isinstance(a, torch.fx.Node)]
        out_map = self._out_map(out_shape, tensor_args, self.hints.get(node.name))
        args = [self._operand(a, out_shape, out_map) for a in bound.values()]
        value = fn(self, args, bound)
        if value.kind == "load" or value in args or value.kind == "reduce":
            value = self.math("{}", value)
        if value.kind != "const":
            value.ctype = self.current_ctype
        self._set(node, value, out_map)

    def _index(self, d: int) -> Value:
        """The index along dim d of S at each point of the tile."""
        key = ("index", d)
        if key not in self.loads:
            v = Value(self._fresh(f"idx{d}"), "index", "i", frozenset({d}), 0, dim=d)
            self.loads[key] = v
            self.values.append(v)
        return self.loads[key]

    def _embedding(self, node: torch.fx.Node) -> None:
        """embedding(weight, indices): row indices[p] of the weight at each point p, read
        straight from memory (the weight is a kernel input). Indices outside the table read 0
        instead of faulting (eager raises there)."""
        bound = bind(node)
        weight, indices = bound["weight"], bound["indices"]
        wmeta = self._table(weight, "embedding")
        if len(wmeta.shape) != 2:
            raise Unsupported("embedding weight is not 2-D")
        if not isinstance(indices, torch.fx.Node):
            raise Unsupported("embedding indices are not a tensor")
        out_shape = _concrete_shape(node.meta.get("val"))
        out_map = self._out_map(out_shape, [], self.hints.get(node.name))
        if indices.name in self.env:
            # indices computed in this kernel (T5's relative position buckets): usable where
            # they were computed at the positions of the rows this lookup reads
            idx, idx_map = self.env[indices.name]
            if not isinstance(idx, Value) or tuple(idx_map) != tuple(out_map[:-1]):
                raise Unsupported("embedding indices computed at other positions")
        else:
            idx = self._operand(indices, out_shape[:-1], out_map[:-1])
        self._read_rows(node, weight, idx, out_map, {out_map[-1]: wmeta.stride[1]}, 0)

    def _gather(self, node: torch.fx.Node) -> None:
        """gather(self, dim, index): self[..., index[p], ...] at each point p, the index
        choosing the position along `dim` (the row of an embedding read, with the row stride
        of that dim) and p's own position along the others. `self` is a kernel input; an
        index outside the dim reads 0 (eager raises there)."""
        bound = bind(node)
        src, index = bound["self"], bound["index"]
        if bound.get("sparse_grad"):
            raise Unsupported("sparse gather")
        smeta = self._table(src, "gather")
        out_shape = _concrete_shape(node.meta.get("val"))
        if len(smeta.shape) != len(out_shape) or not out_shape or not isinstance(index, torch.fx.Node):
            raise Unsupported("gather of another rank")
        d = bound["dim"] % len(out_shape)
        out_map = self._out_map(out_shape, [index], self.hints.get(node.name))
        idx = self._operand(index, out_shape, out_map)
        along = {m: smeta.stride[k] for k, m in enumerate(out_map) if k != d}
        self._read_rows(node, src, idx, out_map, along, d)

    def _table(self, t: object, what: str) -> TensorMeta:
        """The metadata of a tensor rows are read from: a kernel input on the kernel's device."""
        if not isinstance(t, torch.fx.Node) or t.name not in self.input_index:
            raise Unsupported(f"{what} from a tensor computed in the kernel")
        if t.meta["val"].device != self.device:
            raise Unsupported(f"{what} from a tensor on another device")
        return tensor_meta(t)

    def _read_rows(
        self,
        node: torch.fx.Node,
        table: torch.fx.Node,
        idx: object,
        out_map: tuple,
        along: dict,
        row_dim: int,
    ) -> None:
        """`node` as the gather value reading `table` at row idx[p] of its dim `row_dim`, and
        along the kernel dims of `along` (kernel dim -> element stride) at p's own position."""
        if not isinstance(idx, Value) or idx.ctype != "i":
            raise Unsupported(f"{node.target} indices are not an integer tensor")
        meta = tensor_meta(table)
        strides = [0] * len(self.space)
        dims = set(idx.dims)
        for m, stride in along.items():
            if m is not None:
                strides[m] = stride
                if self.space[m] > 1:
                    dims.add(m)
        self.current_ctype = self.ctype_for(meta.dtype)
        v = Value(
            self._fresh(node.name),
            "gather",
            self.current_ctype,
            frozenset(dims),
            idx.stage,
            args=(idx,),
            input_index=self.input_index[table.name],
            strides=tuple(strides),
            dtype=meta.dtype,
            rows=(meta.stride[row_dim], meta.shape[row_dim]),
        )
        self.values.append(v)
        self._set(node, v, out_map)

    def _iota(self, node: torch.fx.Node) -> None:
        """prims.iota (arange's positions): start + step * index along the dim it lies on."""
        bound = bind(node)
        out_shape = _concrete_shape(node.meta.get("val"))
        out_map = self._out_map(out_shape, [], self.hints.get(node.name))
        start, step = bound.get("start") or 0, bound.get("step") or 1
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, step)):
            raise Unsupported("iota with non-integer start or step")
        self.current_ctype = "i"
        if out_map[0] is None:
            value = self.math("{}", self.literal(start, "i"))
        else:
            value = self.math(f"({{}} * {step} + {start})", self._index(out_map[0]))
        dtype = node.meta["val"].dtype
        if self.ctype_for(dtype) == "f":
            value = self.math("{}.to(tl.float32)", value)
            value.ctype = "f"
        self.current_ctype = value.ctype
        self._set(node, value, out_map)

    def _rand(self, node: torch.fx.Node) -> None:
        """fuselint::philox_rand (fuselint/backend/random.py): tl.rand of the 0-d seed at each
        element's row-major position in the op's own shape, so the draw does not depend on the
        kernel's tiling."""
        seed_node = node.args[0]
        out_shape = _concrete_shape(node.meta.get("val"))
        out_map = self._out_map(out_shape, [], self.hints.get(node.name))
        seed = self._operand(seed_node, out_shape, out_map)
        if not isinstance(seed, Value) or seed.dims:
            raise Unsupported("random seed is not one value")
        terms = []
        stride = 1
        for size, dim in reversed(list(zip(out_shape, out_map, strict=True))):
            if dim is not None:
                terms.append((self._index(dim), stride))
            stride *= size
        self.current_ctype = "i"
        if terms:
            expr = " + ".join(f"{{}} * {st}" for _, st in terms)
            position = self.math(f"({expr})", *[v for v, _ in terms])
        else:
            position = self.math("{}", self.literal(0, "i"))
        value = self.math("tl.rand({}.to(tl.int32), {}.to(tl.int32))", seed, position)
        value.ctype = "f"
        self.current_ctype = "f"
        self._set(node, value, out_map)

    def _placement(self, node: torch.fx.Node, packet: str) -> None:
        """cat and constant_pad_nd of kernel inputs: each input is read shifted along the
        placed dims and masked outside its range; the result selects by index."""
        bound = bind(node)
        out_shape = _concrete_shape(node.meta.get("val"))
        out_map = self._out_map(out_shape, [])
        k = len(out_shape)

        def shifted_load(t: object, starts: dict[int, int], piece: tuple[int, ...] | None = None) -> Value:
            """t read where it lands; `piece`: the shape of the cat piece t is an operand of,
            which t broadcasts to (its missing leading and size-1 dims read no index)."""
            if not isinstance(t, torch.fx.Node) or t.name in self.env or t.name not in self.input_index:
                raise Unsupported(f"{packet} of a value computed in the kernel")
            shape = _concrete_shape(t.meta.get("val"))
            if piece is not None and shape != piece:
                lead = k - len(shape)
                if not _broadcasts(shape, piece) or any(shape[j - lead] != 1 for j in starts if j >= lead):
                    raise Unsupported(f"{packet} piece operand does not broadcast across the cat")
                kept = {lead + j: out_map[lead + j] for j, s in enumerate(shape) if s != 1}
                return self._load(t, tuple(kept.get(lead + j) for j in range(len(shape))))
            if len(shape) != k:
                raise Unsupported(f"{packet} input of another rank")
            smap, shifts = [], []
            for j, size in enumerate(shape):
                if j in starts:
                    if out_map[j] is None:
                        raise Unsupported(f"{packet} along a size-1 dim")
                    smap.append(out_map[j])
                    shifts.append((out_map[j], starts[j], starts[j] + size))
                elif size == out_shape[j]:
                    smap.append(None if size == 1 else out_map[j])
                else:
                    raise Unsupported(f"{packet} input does not match the output")
            return self._load(t, tuple(smap), tuple(shifts))

        if packet == "cat":
            c = bound["dim"] % k
            pieces, start = [], 0
            for t in bound["tensors"]:
                size = _concrete_shape(t.meta.get("val"))[c] if isinstance(t, torch.fx.Node) else 0
                if size == 0:
                    continue
                if t.name in self.cat_pieces:
                    piece = self._placed_piece(t, {c: start}, shifted_load)
                else:
                    piece = shifted_load(t, {c: start})
                pieces.append((start + size, piece))
                start += size
            if not pieces:
                raise Unsupported("empty cat")
            idx = self._index(out_map[c]) if out_map[c] is not None else None
            value = pieces[-1][1]
            for end, piece in reversed(pieces[:-1]):
                value = self.math(f"tl.where({{}} < {end}, {{}}, {{}})", idx, piece, value)
        else:
            pad = list(bound["pad"])
            if any(p < 0 for p in pad):
                raise Unsupported("negative padding")
            starts = {k - 1 - i // 2: pad[i] for i in range(0, len(pad), 2)}
            src = bound["self"]
            value = shifted_load(src, starts)
            fill = bound.get("value") or 0
            if fill != 0:
                in_shape = _concrete_shape(src.meta.get("val"))
                inside = None
                for j, start in starts.items():
                    idx = self._index(out_map[j])
                    cond = self.math(f"(({{}} >= {start}) & ({{}} < {start + in_shape[j]}))", idx, idx)
                    inside = cond if inside is None else self.math("({} & {})", inside, cond)
                value = self.math("tl.where({}, {}, {})", inside, value, fill)
        if value.kind != "math":
            value = self.math("{}", value)
        value.ctype = self.current_ctype
        self._set(node, value, out_map)

    def _view(self, node: torch.fx.Node, packet: str) -> None:
        src = node.args[0]
        if not isinstance(src, torch.fx.Node) or src.name not in self.env:
            raise Unsupported("view of a value not computed in the kernel")
        value, in_map = self.env[src.name]
        if not isinstance(value, Value):
            raise Unsupported("view of a tuple")
        in_shape = _concrete_shape(src.meta.get("val"))
        out_shape = _concrete_shape(node.meta.get("val"))
        if packet == "as_strided":
            # ConvNeXt's pooled (N, C, 1, 1) restrided for its LayerNorm: the same element at
            # every index when only size-1 dims change stride
            src_val = src.meta.get("val")
            size, stride = tuple(node.args[1]), tuple(node.args[2])
            offset = node.args[3] if len(node.args) > 3 else None
            if (
                size != tuple(in_shape)
                or offset not in (None, src_val.storage_offset())
                or any(n != 1 and a != b for n, a, b in zip(size, stride, src_val.stride(), strict=True))
            ):
                raise Unsupported("as_strided that moves elements")
            out_map = tuple(in_map)
        elif packet == "permute":
            order = [d % len(in_shape) for d in node.args[1]]
            out_map = tuple(in_map[p] for p in order)
        elif packet == "t":
            out_map = tuple(reversed(in_map))
        elif packet == "expand":
            # kept dims from the source, broadcast ones where a reader places them (an embedding's
            # indices) or right-aligned
            out_map = self._out_map(out_shape, [src], self.hints.get(node.name))
        else:
            kept = [m for s, m in zip(in_shape, in_map, strict=True) if s != 1]
            if [s for s in in_shape if s != 1] != [s for s in out_shape if s != 1]:
                raise Unsupported(f"{packet} regroups dims")
            it = iter(kept)
            out_map = tuple(None if s == 1 else next(it) for s in out_shape)
        used = [d for d in out_map if d is not None]
        if len(set(used)) != len(used):
            raise Unsupported("view maps two dims onto one")
        self.env[node.name] = (value, out_map)

    def _reduce(self, node: torch.fx.Node, packet: str) -> None:
        overload = node.target._overloadname
        with_indices = packet in ("max", "min") and overload == "dim"
        if packet in ("max", "min") and overload not in ("default", "dim"):
            raise Unsupported(f"{packet}.{overload}")
        bound = bind(node)
        src = next(iter(bound.values()))
        if not isinstance(src, torch.fx.Node):
            raise Unsupported("reduction of a non-tensor")
        in_shape = _concrete_shape(src.meta.get("val"))
        if in_shape != self.space:
            raise Unsupported("reductions over different spaces")
        dims = _reduced_dims(bound.get("dim"), len(in_shape))
        if tuple(d for d in dims if in_shape[d] > 1) != self.rdims:
            raise Unsupported("reductions over different dims")
        ident = self._identity_map()
        if src.name in self.env:
            x, xmap = self.env[src.name]
            if xmap != ident:
                raise Unsupported("reduction input is permuted")
        else:
            x = self._operand(src, in_shape, ident)
        if packet in ("any", "all"):
            # any/all (a mask's rows): the max/min of the 0/1 truth values, read back as bools
            truth = self.math("tl.where({} != 0, 1.0, 0.0)", x)
            truth.ctype = "f"
            self.current_ctype = "f"
            red = self._reduction("max" if packet == "any" else "min", truth)
            n_keep = bool(bound.get("keepdim", False)) or len(dims) == 0
            out_map = tuple(None if d in dims else m for d, m in enumerate(ident) if n_keep or d not in dims)
            value = self.math("({} != 0.0)", red)
            value.ctype = "b"
            self.current_ctype = "b"
            self._set(node, value, out_map)
            return
        if x.ctype != "f":
            raise Unsupported("reduction of a non-float tensor")
        self.current_ctype = "f"
        n = math.prod(in_shape[d] for d in dims)
        keepdim = bool(bound.get("keepdim", False)) or len(dims) == 0
        out_map = tuple(None if d in dims else m for d, m in enumerate(ident) if keepdim or d not in dims)
        if with_indices:
            # max.dim/min.dim: the values are a reduction; the indices are not supported.
            op = "max" if packet == "max" else "min"
            self.env[node.name] = ((self._reduction(op, x), None), (out_map, None))
        elif packet in ("sum", "amax", "amin", "max", "min"):
            op = {"sum": "sum", "amax": "max", "max": "max", "amin": "min", "min": "min"}[packet]
            self._set(node, self._reduction(op, x), out_map)
        elif packet == "mean":
            self._set(node, self.math("({} / {})", self._reduction("sum", x), float(n)), out_map)
        else:
            correction = bound.get("correction")
            correction = 1 if correction is None else correction
            mean = self.math("({} / {})", self._reduction("sum", x), float(n))
            mean.name = self._fresh(node.name + "_mean")
            dev = self.math("({} - {})", x, mean)
            sq = self.math("({0} * {0})", dev)
            m2 = self._reduction("sum", sq)
            if m2.kind == "reduce":
                m2.mean = mean
            var = self.math("({} / {})", m2, float(max(n - correction, 0)))
            var.name = self._fresh(node.name + "_var")
            if packet == "var":
                self._set(node, var, out_map)
            else:
                self.env[node.name] = ((var, mean), (out_map, out_map))

    def _window(self, node: torch.fx.Node) -> None:
        """max_pool2d_with_indices whose indices nothing reads: a window max per output point."""
        if self.rdims:
            raise Unsupported("window op in a reduction kernel")
        b = bind(node)
        src = b["self"]
        in_shape = _concrete_shape(src.meta.get("val"))
        out_shape = _concrete_shape(node.meta["val"][0])
        if len(in_shape) not in (3, 4) or out_shape != self.space:
            raise Unsupported("max_pool2d over another space")

        def pair(v: object, default: tuple[int, int]) -> tuple[int, int]:
            v = list(v) if isinstance(v, (list, tuple)) else [v]
            if not v:
                return default
            return (int(v[0]), int(v[-1]))

        kernel = pair(b["kernel_size"], (1, 1))
        window = Window(
            source=None,  # type: ignore[arg-type]
            values=[],
            in_shape=in_shape,
            kernel=kernel,
            stride=pair(b.get("stride"), kernel),
            padding=pair(b.get("padding", 0), (0, 0)),
            dilation=pair(b.get("dilation", 1), (1, 1)),
        )
        if kernel[0] * kernel[1] > 64:
            raise Unsupported("window larger than 64 taps")
        if self.prologue:
            sub = Lowering(self.prologue, self.inputs, [], self.used_names)
            if sub.space != in_shape or sub.rdims:
                raise Unsupported("pooling prologue over another space")
            for n in self.prologue:
                sub._lower_node(n)
            value, smap = sub.env[src.name]
            if not isinstance(value, Value) or smap != sub._identity_map():
                raise Unsupported("pooled value is permuted")
            if any(v.kind not in ("load", "math") or v.shifts for v in sub.values):
                raise Unsupported("pooling prologue with placements or reductions")
            window.values = sub.values
        else:
            if src.name not in self.input_index:
                raise Unsupported("pooled value is neither computed here nor an input")
            meta = tensor_meta(src)
            value = Value(
                self._fresh(src.name),
                "load",
                self.ctype_for(meta.dtype),
                frozenset(range(len(in_shape))),
                0,
                input_index=self.input_index[src.name],
                strides=meta.stride,
                dtype=meta.dtype,
            )
            window.values = [value]
        if value.ctype != "f":
            raise Unsupported("max_pool2d of a non-float tensor")
        window.source = value
        v = Value(
            self._fresh(node.name),
            "window",
            "f",
            frozenset(d for d, n in enumerate(self.space) if n > 1),
            0,
            window=window,
        )
        self.values.append(v)
        ident = self._identity_map()
        self.env[node.name] = ((v, None), (ident, None))

    def _reduction(self, op: str, x: Value) -> Value:
        if not (x.dims & self.rset):
            # Constant along R: the reduction is arithmetic, not a loop.
            return self.math("({} * {})", x, float(self.rnumel_)) if op == "sum" else x
        v = Value(self._fresh(f"{op}_r"), "reduce", "f", x.dims - self.rset, x.stage + 1, (x,), reduce_op=op)
        self.values.append(v)
        return v

    def _streams(self, stores: list[Store]) -> list[tuple[tuple[int, ...], int]]:
        """(strides along each dim of S, elements moved) of every tensor the kernel reads or
        writes, stores first. A window's source counts once per tap."""

        def touched(strides: tuple[int, ...]) -> int:
            return math.prod(self.space[d] for d, st in enumerate(strides) if st)

        streams = [(s.strides, touched(s.strides)) for s in stores]
        for v in self.values:
            if v.kind in ("load", "gather"):
                streams.append((v.strides, touched(v.strides)))
            if v.kind == "window":
                taps = v.window.kernel[0] * v.window.kernel[1]
                outputs = math.prod(self.space)
                streams += [(u.strides, outputs * taps) for u in v.window.values if u.kind == "load"]
        return streams

    def _innermost(self, strides: tuple[int, ...]) -> int | None:
        moving = [d for d, st in enumerate(strides) if st and self.space[d] > 1]
        return min(moving, key=lambda d: strides[d]) if moving else None

    def _transpose_tile(
        self, streams: list[tuple[tuple[int, ...], int]], main: tuple[int, ...], stores: list[Store]
    ) -> tuple[int | None, tuple[int, ...]]:
        """(tile dim, strides to order the other dims by) for a pointwise kernel whose heaviest
        tensor and another big one are contiguous along different dims; (None, main) when one
        order serves every big tensor. The shorter of the two dims goes on the tile axis, the
        other is innermost along the first axis."""
        q = self._innermost(main)
        weight = max(n for _, n in streams)
        other = [
            (n, st)
            for st, n in streams
            if n * MIXED_LAYOUT_SHARE >= weight and self._innermost(st) not in (q, None)
        ]
        if q is None or not other:
            return None, main
        _, second = max(other, key=lambda o: o[0])
        p = self._innermost(second)
        tile, order_by = (q, second) if self.space[q] < self.space[p] else (p, main)
        if self.space[tile] > MAX_TILE or any(not s.strides[tile] for s in stores):
            return None, main
        return tile, order_by

    @property
    def rnumel_(self) -> int:
        return math.prod(self.space[d] for d in self.rdims)

    def _cat_pieces(self) -> frozenset[str]:
        """Pointwise nodes read only by cats of this group, over kernel inputs (or other such
        nodes) of their own shape: each is computed where its cat places it, from loads
        shifted as the cat shifts a plain input (rotate_half's `cat((-x2, x1))`)."""
        members = {n.name for n in self.nodes}
        outputs = {n.name for n in self.outputs}
        pieces: set[str] = set()
        for n in self.nodes:
            if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
                continue
            packet = n.target.overloadpacket.__name__
            if packet in VIEWS or packet in REDUCTIONS or lowering_for(n.target) is None:
                continue
            if n.name in outputs or not n.users:
                continue
            if not all(
                u.name in members and getattr(u.target, "overloadpacket", None) is torch.ops.aten.cat
                for u in n.users
            ):
                continue
            shape = _concrete_shape(n.meta.get("val"))
            operands = [a for a in n.all_input_nodes]
            if operands and all(
                (a.name in pieces and _concrete_shape(a.meta.get("val")) == shape)
                or (
                    a.name in self.input_index
                    and a.name not in members
                    and _broadcasts(_concrete_shape(a.meta.get("val")), shape)
                )
                for a in operands
            ):
                # one operand at least has the piece's shape: it carries the cat's shift and mask
                if any(_concrete_shape(a.meta.get("val")) == shape for a in operands):
                    pieces.add(n.name)
        return frozenset(pieces)

    def _placed_piece(self, node: torch.fx.Node, starts: dict[int, int], load) -> Value:
        """A cat piece computed at its place: its operands read through `load` (shifted; one
        that broadcasts to the piece, a ViT patch embedding's bias, reads its own index only)."""
        bound = bind(node)
        shape = _concrete_shape(node.meta.get("val"))

        def operand(a: torch.fx.Node) -> Value:
            if a.name in self.cat_pieces:
                return self._placed_piece(a, starts, load)
            if _concrete_shape(a.meta.get("val")) != shape:
                return load(a, starts, shape)
            return load(a, starts)

        args = [operand(a) if isinstance(a, torch.fx.Node) else a for a in bound.values()]
        saved = self.current_ctype, self.current_packet
        self.current_packet = node.target.overloadpacket.__name__
        self.current_ctype = self.ctype_for(node.meta["val"].dtype)
        value = lowering_for(node.target)(self, args, bound)
        if value.kind == "load" or value in args or value.kind == "reduce":
            value = self.math("{}", value)
        if value.kind != "const":
            value.ctype = self.current_ctype
        self.current_ctype, self.current_packet = saved
        return value

    def run(self) -> KernelIR:
        self.cat_pieces = self._cat_pieces()
        for node in self.nodes:
            if node.name not in self.cat_pieces:
                self._lower_node(node)
        stores = []
        out_meta = []
        for i, node in enumerate(self.outputs):
            value, smap = self.env[node.name]
            if not isinstance(value, Value):
                raise Unsupported("tuple output")
            meta = tensor_meta(node)
            self.ctype_for(meta.dtype)
            strides = self._space_strides(smap, meta.stride)
            stores.append(Store(value, i, tuple(strides), meta.dtype))
            out_meta.append(meta)
        stores += self._copy_stores(stores)
        if not stores:
            raise Unsupported("nothing to store")
        ops = tuple(
            n.target.overloadpacket.__name__
            for n in self.all_nodes
            if isinstance(n.target, torch._ops.OpOverload) and n.target.overloadpacket.__name__ not in VIEWS
        )
        streams = self._streams(stores)
        main = max(streams, key=lambda st: st[1])[0]  # max() keeps the first: stores win ties
        tile, order_by = (None, main) if self.rset else self._transpose_tile(streams, main, stores)
        natural = [d for d in range(len(self.space)) if d not in self.rset and d != tile]
        xorder = tuple(sorted(natural, key=lambda d: (-order_by[d], d)))
        return KernelIR(
            xorder=xorder,
            contiguous_dim=self._innermost(main),
            tile_dim=tile,
            space=self.space,
            rdims=self.rdims,
            inputs=tuple(n.name for n in self.inputs),
            input_meta=tuple(tensor_meta(n) for n in self.inputs),
            outputs=tuple(n.name for n in self.outputs),
            output_meta=tuple(out_meta),
            values=self.values,
            stores=stores,
            fused=tuple(describe(n) for n in self.all_nodes),
            device=self.device,
            op_names=ops,
        )

    def _space_strides(self, smap: tuple, stride: tuple) -> list[int]:
        """A tensor's element strides along the kernel's dims, from its dim map (0 where it does
        not vary)."""
        strides = [0] * len(self.space)
        for j, d in enumerate(smap):
            if d is not None:
                strides[d] = stride[j]
        return strides

    def _copy_stores(self, stores: list[Store]) -> list[Store]:
        """The stores of the group's copy_ into inputs. Each element of the input is written once,
        by the program that reads it for that store alone: a value stored elsewhere that read the
        input could see it written."""
        out = []
        for dst, value, smap in self.copies:
            j = self.input_index[dst.name]
            meta = tensor_meta(dst)
            strides = self._space_strides(smap, meta.stride)
            if any(
                strides[d] == 0 and self.space[d] > 1 for d in range(len(self.space)) if d not in self.rset
            ):
                raise Unsupported("copy_ into an input broadcast over the kernel")
            others = [s.value for s in stores] + [v for d, v, _ in self.copies if d is not dst]
            # its own value may read only the element it stores: a gather or window of the
            # input reads elements that other programs store
            if _reads_input(others, j) or any(
                (v.kind == "load" and v.input_index == j and (v.strides != tuple(strides) or v.shifts))
                or (v.kind == "gather" and v.input_index == j)
                or v.kind == "window"
                for v in self.values
            ):
                raise Unsupported("copy_ into an input read elsewhere in the kernel")
            out.append(Store(value, -1, tuple(strides), meta.dtype, input_index=j))
        return out


def _reads_input(values: list[Value], j: int) -> bool:
    """Whether any of `values` is computed from input j."""
    seen: set[int] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.input_index == j and v.kind in ("load", "gather") or v.kind == "window":
            return True
        stack.extend(a for a in v.args if isinstance(a, Value))
        if v.mean is not None:
            stack.append(v.mean)
    return False


def _reads_reductions_only_through(v: Value, mean: Value) -> bool:
    """Whether `v` depends on reductions only through `mean`."""
    seen: set[int] = set()
    stack = [v]
    while stack:
        u = stack.pop()
        if u is mean or id(u) in seen:
            continue
        seen.add(id(u))
        if u.kind == "reduce":
            return False
        stack.extend(a for a in u.args if isinstance(a, Value))
    return True


def _split_window(
    nodes: list[torch.fx.Node], outputs: list[torch.fx.Node]
) -> tuple[list[torch.fx.Node], list[torch.fx.Node]]:
    """(prologue, rest): the nodes that only feed a window op's source, computed per tap."""
    pools = [
        n
        for n in nodes
        if getattr(getattr(n.target, "overloadpacket", None), "__name__", "") in GENERATED_WINDOWS
    ]
    if not pools:
        return [], nodes
    if len(pools) > 1:
        raise Unsupported("more than one window op")
    pool = pools[0]
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in pool.users):
        raise Unsupported("max_pool2d indices are used")
    members = set(nodes)
    prologue: set[torch.fx.Node] = set()
    stack = [a for a in pool.args[:1] if isinstance(a, torch.fx.Node) and a in members]
    while stack:
        n = stack.pop()
        if n not in prologue:
            prologue.add(n)
            stack.extend(a for a in n.all_input_nodes if a in members)
    outs = set(outputs)
    for n in prologue:
        if n in outs or any(u not in prologue and u is not pool for u in n.users):
            raise Unsupported("a pooling prologue value is also used elsewhere")
    return [n for n in nodes if n in prologue], [n for n in nodes if n not in prologue]


def lower_group(
    nodes: list[torch.fx.Node], inputs: list[torch.fx.Node], outputs: list[torch.fx.Node]
) -> KernelIR:
    """The KernelIR of a group, or Unsupported."""
    return Lowering(nodes, inputs, outputs).run()
