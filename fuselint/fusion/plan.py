"""FusionPlan: partition a FusionGraph into groups, each one future kernel.

The rules follow TVM's op patterns and Inductor's scheduler: pointwise chains fuse, broadcast
inputs fuse, pointwise producers fuse into a reduction over the same rows, pointwise consumers
of a reduction fuse when they share its rows (so a hand-written softmax or LayerNorm is ONE
kernel), independent groups that read a common tensor fuse horizontally, matmul/conv are their
own kernels, views are free, and no merge may create a cycle between groups (a path
A -> mm -> B forbids merging A and B). A multi-consumer value whose consumers land in other
kernels is recomputed there when that is cheap (Inductor's test: pointwise, <= 4 reads not
counting broadcast vectors, <= 30 ops; bytes are reported, not limited) and listed in `FusionPlan.recomputations`,
else written out and listed in `FusionPlan.materialized`, each with the reason.

What the kernel generator may rely on.

Words: a *value* is a tensor a node produces (a multi-output op's values are its getitems).
A group's `nodes` hold its compute nodes plus every view/getitem on the way from a value
to a member that reads it (so loads can follow the views' strides in `fx.meta["val"]`).
`inputs` are the values it reads from memory; `outputs` the values it writes to memory.
`roles` gives each compute node's role; `shape` is the group's iteration shape, `space` its
(xnumel, rnumel). A member reads another member of its group directly or through *flat* views
(view, reshape, squeeze, unsqueeze, an expand to the same shape: the reader sees the producer's
values in row-major order), except that a "prologue" member may be read through any view
(permute, expand, slice, ...). A view's index map is that of the view chain replayed on a
contiguous tensor of its value's shape (`GraphFacts.logical[view]` holds that meta tensor:
its strides and offset map the view's index to the value's row-major index); loads of inputs
from memory follow the real strides in `fx.meta["val"]`.

Roles of compute nodes:
  "full"      pointwise op over all numel(shape) points of the group (flat index; any shape
              with that numel when the group is pointwise or reduces trailing dims).
  "gather"    an injective op over numel(shape) points that reads its first argument (its data;
              a list for cat) at computed positions: cat, constant_pad_nd, gather, index,
              index_select, embedding, pooling windows (max_pool with offsets, avg_pool). Its
              data is loaded from memory or computed by "prologue" members; its other tensor
              arguments (indices) are inputs or, when shaped like its output, full members.
  "prologue"  pointwise op whose values only this group reads, always at positions of their
              own: a gather's data (ReLU inside max-pool windows) or through a permute/expand/
              slice view (sin(x).t() + 1). It is evaluated at each position read, so it runs
              once per read; its inputs broadcast against its own shape as usual.
  "bcast"     small pointwise op whose value is broadcast into its readers (BatchNorm's
              rsqrt(var + eps) per channel, scalars): evaluated like a broadcast load, at the
              reader's point projected onto the read shape (reader shape == `shape`).
  "reduce"    a reduction (sum, amax, mean, var_mean, argmax, ...) of one row of the group.
  "outer"     pointwise op with one value per row (LayerNorm's rsqrt(var + eps)).
  "anchor"    the matmul/conv/other op of an opaque group; "epilogue" pointwise after it.

Kinds of groups:
1. "pointwise": full, bcast members; iterate the flat index 0..numel(shape). Several outputs.
   ATen broadcasting applies to inputs as usual (against each member's own shape).
2. "injective": like pointwise with at least one gather (and its prologue members).
3. "reduction": `shape` is the reductions' input shape F, `reduce_dims` the reduced dims
   (sorted, non-negative); all reductions reduce the same rows. Members: reduce, full
   (prologue ops feeding a reduction and epilogue ops after one, e.g. softmax's sub/exp/div),
   outer, gather (in the full space), prologue, bcast. A full member reads an outer/reduce value
   broadcast along the row (keepdim shape). Reductions may depend on earlier reductions of the
   same row (softmax: amax, then sum of exp(x - amax)), so rows are processed one at a time
   (persistent or looped over r). When reduce_dims are the trailing dims, flat index = row *
   rnumel + r for every full member; otherwise every full member has shape F exactly, outer
   members have F with reduce_dims set to 1 (or squeezed), and indexing goes by dims.
   `launches` is 2 when the reduction is split (few long rows, see PlanOptions): then no full
   member reads a reduction's result (only outer members do), so partial sums over blocks of
   a row and then their total (two launches) compute the group.
4. "matmul" | "conv" | "other": a single anchor op run as is (ATen/cuBLAS/cuDNN). Only with
   PlanOptions(epilogue_into_matmul=True) do matmul/conv take epilogue members over the
   anchor's output numel (Inductor on GPU does not fuse epilogues into aten mm).

A group never holds more than `PlanOptions.max_nodes` compute nodes (Inductor: 64).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import networkx as nx
import torch

from fuselint.graph.fusion_graph import FusionGraph
from fuselint.graph.layout import KEPT
from fuselint.graph.op_facts import ELEMENTWISE_COPIES, FLAT_VIEWS, LOOKUPS, WINDOW_OPS

OPAQUE = ("matmul", "conv", "other")


@dataclass(frozen=True)
class PlanOptions:
    max_nodes: int = 64  # Inductor's max_fusion_size
    epilogue_into_matmul: bool = False  # backend can generate mm/conv with a pointwise epilogue
    horizontal: bool = True  # fuse independent groups that read a common tensor
    recompute_max_ops: int = 30  # Inductor's realize_opcount_threshold
    recompute_max_reads: int = 4  # Inductor's realize_reads_threshold (broadcast vectors aside)
    recompute_max_cat_inputs: int = 8  # Inductor's MAX_COMPLEX_POINTWISE_CAT
    # Inductor splits a reduction with few rows and long rows into two kernels (partial sums,
    # then their total) to use the whole GPU: fewer than 2 x SMs rows (H100/H200: 132 SMs) of
    # more than 8192 elements (choices.reduction_split_factor). No full-size op can then read
    # the result in the same kernel.
    split_max_rows: int = 264
    split_min_rnumel: int = 8192


@dataclass(frozen=True)
class FusionGroup:
    id: int
    kind: str  # "pointwise" | "reduction" | "injective" | "matmul" | "conv" | "other"
    nodes: tuple[str, ...]  # FX node names in topological order (views/getitems used inside too)
    inputs: tuple[str, ...]  # values produced outside the group that it reads
    outputs: tuple[str, ...]  # values computed here and read outside (or graph outputs)
    recomputed: tuple[str, ...] = ()  # nodes also computed in another group
    # Additions for the kernel generator (see the module docstring):
    roles: tuple[tuple[str, str], ...] = ()  # (compute node, role)
    shape: tuple[int, ...] = ()  # full iteration shape
    reduce_dims: tuple[int, ...] = ()  # reduction groups: reduced dims of `shape`
    space: tuple[int, int] = (0, 1)  # (xnumel, rnumel)
    launches: int = 1  # 2 for a split reduction (partial sums, then their total)

    @property
    def role(self) -> dict[str, str]:
        return dict(self.roles)

    @property
    def compute_nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.roles)


@dataclass(frozen=True)
class Materialized:
    """A multi-consumer value written to memory because its consumers land in different kernels."""

    node: str  # the value's name
    groups: tuple[int, ...]  # ids of the groups that read it (its own group first when it reads it)
    bytes: int  # bytes of the value (one write; each group in `groups` but its own reads it once)
    reason: str


@dataclass(frozen=True)
class Recomputed:
    """A multi-consumer value that each reading kernel recomputes instead of reading it."""

    node: str  # the value's name
    groups: tuple[int, ...]  # ids of the groups that recompute it
    reason: str


@dataclass(frozen=True)
class FusionPlan:
    graph: FusionGraph
    groups: tuple[FusionGroup, ...]  # topological order
    materialized: tuple[Materialized, ...]
    options: PlanOptions = field(default_factory=PlanOptions)
    recomputations: tuple[Recomputed, ...] = ()  # why each recomputed value was not written out

    @property
    def launches(self) -> int:
        return sum(g.launches for g in self.groups)

    def group_of(self) -> dict[str, int]:
        """Node -> id of the group that computes it (its first group when recomputed elsewhere)."""
        out: dict[str, int] = {}
        for g in self.groups:
            for n in g.nodes:
                out.setdefault(n, g.id)
        return out


# ---------------------------------------------------------------------------------------------
# Facts about the graph that every decision needs

# A read at most 1/BROADCAST_READ the size of the value recomputed (a per-channel vector) does not
# count towards `recompute_max_reads` (`_Planner._recompute_plan`).
BROADCAST_READ = 64


def _prod(shape) -> int:
    return math.prod(shape) if shape else 1


def _packet(fg: FusionGraph, n: str) -> str:
    return fg.dag.nodes[n]["op"].split(".")[1] if fg.dag.nodes[n]["op"].count(".") >= 2 else ""


_ALLOCATIONS = frozenset({"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"})


def _launches_nothing(fx: torch.fx.Node) -> bool:
    """Ops that produce no tensor (sym_size, asserts) or only allocate one, and values a compiled
    graph makes once and keeps (a weight's layout copy)."""
    if fx.meta.get(KEPT):
        return True
    val = fx.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    if not any(isinstance(v, torch.Tensor) for v in vals):
        return True
    target = fx.target
    return isinstance(target, torch._ops.OpOverload) and target.overloadpacket.__name__ in _ALLOCATIONS


def _replay_view(fx: torch.fx.Node, base):
    """The view applied to `base` (a meta tensor, or list of them for split's getitem), or None
    when its arguments are not plain values (symbolic sizes)."""
    rest = (*fx.args[1:], *fx.kwargs.values())
    if base is None or any(isinstance(a, torch.fx.Node) for a in rest):
        return None
    try:
        return fx.target(base, *fx.args[1:], **fx.kwargs)
    except (RuntimeError, TypeError, ValueError, IndexError):
        return None


def _contiguous_meta(shape) -> torch.Tensor | None:
    if shape and isinstance(shape[0], tuple):
        return None
    return torch.empty(tuple(shape), device="meta")


def _live(dag: nx.DiGraph) -> set[str]:
    """The outputs, the ops that write into their arguments (a training graph's `copy_` of
    BatchNorm's new running statistics into the module's buffers), and their ancestors: dead code
    (no path to either) runs nowhere. Roots are taken last first, so a root that feeds a later one
    costs no search of its own."""
    live: set[str] = set()
    for n in reversed(list(dag.nodes)):
        if (dag.nodes[n]["is_output"] or _writes_in_place(dag.nodes[n].get("fx"))) and n not in live:
            live |= nx.ancestors(dag, n) | {n}
    return live


def _writes_in_place(fx: object) -> bool:
    target = getattr(fx, "target", None)
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable


class GraphFacts:
    """What planning and costing read off a FusionGraph: each node's value (views look through
    to the tensor they show), who writes each value, who reads it, through which view."""

    def __init__(self, fg: FusionGraph):
        self.fg = fg
        dag = fg.dag
        self.order = {n: i for i, n in enumerate(dag.nodes)}
        self.kind: dict[str, str] = {}  # planner kind of each compute node
        self.value: dict[str, str] = {}  # node -> the value it shows (views look through)
        self.home: dict[str, str] = {}  # value -> compute node (or input) that writes it
        self.flat: dict[str, bool] = {}  # view node -> chain from its value is flat
        # view node -> the view chain replayed on a contiguous meta tensor of its value's shape:
        # its strides and offset map the view's index to the value's row-major index
        self.logical: dict[str, object] = {}
        for n, d in dag.nodes(data=True):
            k = d["kind"]
            fx = d["fx"]
            if k == "input" or (k != "view" and _launches_nothing(fx)):
                # graph inputs, and ops no kernel runs for (sizes, allocations): read as inputs
                self.value[n] = self.home[n] = n
                self.flat[n] = True
            elif k == "view":
                parent = fx.args[0].name if fx.args and isinstance(fx.args[0], torch.fx.Node) else None
                self.logical[n] = None
                if parent is None:
                    self.value[n] = self.home[n] = n
                    self.flat[n] = True
                elif fx.target is operator.getitem and parent in self.kind:
                    # getitem of a multi-output compute op: the getitem is the value.
                    self.value[n] = n
                    self.home[n] = parent
                    self.flat[n] = True
                    self.logical[n] = _contiguous_meta(d["shape"])
                else:
                    self.value[n] = self.value[parent]
                    base = self.logical.get(parent)
                    if base is None and parent == self.value[n]:
                        base = _contiguous_meta(dag.nodes[parent]["shape"])
                    self.logical[n] = view = _replay_view(fx, base)
                    if isinstance(view, torch.Tensor):
                        # flat when it shows the value element for element in row-major order
                        numel = _prod(dag.nodes[self.value[n]]["shape"])
                        same = view.is_contiguous() and view.storage_offset() == 0 and view.numel() == numel
                    else:
                        same = _packet(fg, n) in FLAT_VIEWS
                    self.flat[n] = self.flat[parent] and same
            else:
                packet = _packet(fg, n)
                if packet in WINDOW_OPS:
                    k = "injective"
                elif k == "injective" and packet in ELEMENTWISE_COPIES:
                    k = "pointwise"
                self.kind[n] = k
                self.value[n] = self.home[n] = n
                self.flat[n] = True
        self.shape = {n: d["shape"] for n, d in dag.nodes(data=True)}
        self.bytes = {n: d["bytes"] for n, d in dag.nodes(data=True)}
        live = _live(dag)
        self.kind = {c: k for c, k in self.kind.items() if c in live}
        # reads[c] = [(node read, value)] for compute node c; consumers[value] = compute nodes
        self.reads: dict[str, list[tuple[str, str]]] = {}
        self.consumers: dict[str, list[str]] = {}
        for c in self.kind:
            rs = []
            for p in dag.predecessors(c):
                v = self.value[p]
                rs.append((p, v))
                self.consumers.setdefault(v, [])
                if c not in self.consumers[v]:
                    self.consumers[v].append(c)
            self.reads[c] = rs
        # compute node -> compute nodes that read a value it writes (views looked through)
        self.deps = nx.DiGraph()
        self.deps.add_nodes_from(self.kind)
        self.deps.add_edges_from(
            (self.home[v], c) for c, rs in self.reads.items() for _p, v in rs if self.home[v] in self.kind
        )
        self.values_of: dict[str, list[str]] = {}  # compute node -> the values it writes
        for v, h in self.home.items():
            if h in self.kind:
                self.values_of.setdefault(h, []).append(v)
        self.graph_outputs = {self.value[n] for n, d in dag.nodes(data=True) if d["is_output"]}
        self.rinfo = {c: self._reduction_info(c) for c, k in self.kind.items() if k == "reduction"}

    def numel(self, n: str) -> int:
        s = self.shape[n]
        if s and isinstance(s[0], tuple):
            return _prod(s[0])
        return _prod(s)

    def _reduction_info(self, c: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(input shape, reduced dims) of a reduction node."""
        fx = self.fg.dag.nodes[c]["fx"]
        shape = tuple(self.shape[fx.args[0].name])
        dims = fx.kwargs.get("dim", fx.args[1] if len(fx.args) > 1 else None)
        if isinstance(dims, int):
            dims = [dims]
        if not shape:
            return shape, ()  # a 0-d tensor: nothing to reduce over
        if not dims:
            dims = range(len(shape))
        return shape, tuple(sorted({d % len(shape) for d in dims}))

    def data_args(self, c: str) -> tuple[str, ...]:
        """Nodes an injective anchor reads at computed positions (its first argument), in
        argument order: walks over them must not depend on set order."""
        a0 = self.fg.dag.nodes[c]["fx"].args[0]
        items = a0 if isinstance(a0, (list, tuple)) else [a0]
        return tuple(dict.fromkeys(a.name for a in items if isinstance(a, torch.fx.Node)))


# ---------------------------------------------------------------------------------------------
# Groups while planning


@dataclass
class _Group:
    kind: str
    roles: dict[str, str]
    shape: tuple[int, ...]
    rdims: tuple[int, ...] = ()
    anchor: str | None = None

    @property
    def numel(self) -> int:
        return _prod(self.shape)

    @property
    def rnumel(self) -> int:
        return _prod([self.shape[d] for d in self.rdims]) if self.kind == "reduction" else 1

    @property
    def trailing(self) -> bool:
        nd = len(self.shape)
        return self.rdims == tuple(range(nd - len(self.rdims), nd))

    @property
    def outer_shape(self) -> tuple[int, ...]:
        return tuple(1 if i in self.rdims else s for i, s in enumerate(self.shape))


def _seed(f: GraphFacts, c: str) -> _Group:
    k = f.kind[c]
    if k == "pointwise":
        return _Group("pointwise", {c: "full"}, tuple(f.shape[c]))
    if k == "reduction":
        shape, dims = f.rinfo[c]
        return _Group("reduction", {c: "reduce"}, shape, dims)
    shape = f.shape[c]
    if shape and isinstance(shape[0], tuple):
        shape = shape[0]
    if k == "injective":
        return _Group("injective", {c: "gather"}, tuple(shape))
    return _Group(k, {c: "anchor"}, tuple(shape), anchor=c)


def _role_in(f: GraphFacts, g: _Group, c: str) -> str | None:
    """The role pointwise node c would take in g's iteration space, if any."""
    n = f.numel(c)
    if g.kind == "pointwise":
        return "full" if n == g.numel else None
    if g.kind == "reduction":
        if n == g.numel and (g.trailing or tuple(f.shape[c]) == g.shape):
            return "full"
        outer = g.numel // max(g.rnumel, 1)
        squeezed = tuple(s for i, s in enumerate(g.shape) if i not in g.rdims)
        if n == outer and (g.trailing or tuple(f.shape[c]) in (g.outer_shape, squeezed)):
            return "outer"
        return None
    if g.kind == "injective":
        return "full" if n == g.numel else None
    return None


def _kind_of(space_owner: _Group, roles: dict[str, str]) -> str:
    if space_owner.kind == "reduction":
        return "reduction"
    return "injective" if "gather" in roles.values() else "pointwise"


def _broadcasts(small, big) -> bool:
    """ATen's right-aligned broadcasting of shape `small` into shape `big`."""
    small, big = tuple(small), tuple(big)
    if len(small) > len(big) or (small and isinstance(small[0], tuple)):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big), strict=False))


class _Planner:
    def __init__(self, fg: FusionGraph, options: PlanOptions):
        self.f = GraphFacts(fg)
        self.opt = options
        self.groups: dict[int, _Group] = {}
        self.gid: dict[str, int] = {}
        for i, c in enumerate(self.f.kind):
            self.groups[i] = _seed(self.f, c)
            self.gid[c] = i
        # group graph: an edge a -> b when group b reads a value group a computes
        self.links = nx.DiGraph()
        self.links.add_nodes_from(self.groups)
        self.links.add_edges_from(dep for c in self.f.kind for dep in self._deps(c))

    def _deps(self, c: str):
        for _p, v in self.f.reads[c]:
            h = self.f.home[v]
            if h in self.gid and self.gid[h] != self.gid[c]:
                yield self.gid[h], self.gid[c]

    # -- legality -------------------------------------------------------------------------------

    def _no_cycle(self, a: int, b: int) -> bool:
        """Merging a and b keeps the group graph acyclic: no path between them via a third group."""
        others = nx.restricted_view(self.links, (), ((a, b), (b, a)))
        return not (nx.has_path(others, a, b) or nx.has_path(others, b, a))

    def _combine(self, a: _Group, b: _Group, producer_first: bool) -> _Group | None:
        """The group a+b, or None when no single kernel computes both (b may read a)."""
        if len(a.roles) + len(b.roles) > self.opt.max_nodes:
            return None
        if a.kind in OPAQUE or b.kind in OPAQUE:
            return self._combine_epilogue(a, b, producer_first)
        if b.kind == "reduction" and a.kind != "reduction":
            a, b = b, a
        # a owns the iteration space when it has reductions; b's members take roles in it
        if a.kind == b.kind == "reduction" and not self._same_rows(a, b):
            return None
        g = self._in_space_of(a, b)
        if g is not None and self._reads_ok(g):
            return g
        # else one side may run as the other's prologue, at the positions the other reads
        for host, pw in ((a, b), (b, a)):
            if all(self._prologue_role(c, r) for c, r in pw.roles.items()) and self._is_prologue(host, pw):
                roles = dict(host.roles)
                roles.update({c: "prologue" for c in pw.roles})
                g = _Group(_kind_of(host, roles), roles, host.shape, host.rdims)
                if self._reads_ok(g):
                    return g
        return None

    def _prologue_role(self, c: str, role: str) -> bool:
        """May member c (role `role`) run as a prologue, once per position read? Pointwise ops
        may, and so may a prologue of theirs (ConvNeXt's layer scale, permuted into the residual
        add that the next LayerNorm reads through another permute); so may a lookup whose data is read from memory (an embedding or index_select
        table: T5's relative position bias, permuted into the attention mask's layout), but not
        a window, which reads each element several times."""
        if role in ("full", "prologue"):  # a prologue of a prologue: computed where it is read
            return True
        return role == "gather" and _packet(self.f.fg, c) in LOOKUPS

    def _in_space_of(self, a: _Group, b: _Group) -> _Group | None:
        """a + b with b's members taking roles in a's iteration space."""
        roles = dict(a.roles)
        for c, r in b.roles.items():
            if r in ("full", "gather"):
                r = _role_in(self.f, a, c)
                if r is None and b.roles[c] == "gather" and self._lookup_broadcast(a, c):
                    r = "full"
                if r is None or (b.roles[c] == "gather" and r != "full"):
                    return None
                r = "gather" if b.roles[c] == "gather" else r
            roles[c] = r
        return _Group(_kind_of(a, roles), roles, a.shape, a.rdims)

    def _lookup_broadcast(self, g: _Group, c: str) -> bool:
        """Is c a table lookup whose result broadcasts along g's space (BERT's position embedding,
        shared by the batch)? It then reads its row again at each point, as a full one does."""
        f = self.f
        if _packet(f.fg, c) not in LOOKUPS or g.kind == "reduction" and not g.trailing:
            return False
        shape = tuple(f.shape[c])
        return len(shape) == len(g.shape) and shape[-1] == g.shape[-1] and _broadcasts(shape, g.shape)

    def _combine_epilogue(self, a: _Group, b: _Group, producer_first: bool) -> _Group | None:
        if not self.opt.epilogue_into_matmul or not producer_first:
            return None
        if a.kind not in ("matmul", "conv") or b.kind != "pointwise":
            return None
        if any(self.f.numel(c) != a.numel for c in b.roles):
            return None
        roles = dict(a.roles)
        roles.update({c: "epilogue" for c in b.roles})
        g = _Group(a.kind, roles, a.shape, anchor=a.anchor)
        return g if self._reads_ok(g) else None

    def _same_rows(self, a: _Group, b: _Group) -> bool:
        if a.trailing and b.trailing:
            return a.numel == b.numel and a.rnumel == b.rnumel
        return a.shape == b.shape and a.rdims == b.rdims

    def _is_prologue(self, g: _Group, pw: _Group) -> bool:
        """Only g reads pw's values (none leaves the kernel), and always at positions of its own
        (a gather's data, or through a permute/expand/slice view), so pw can run at each."""
        f = self.f
        feeds = False
        for c in pw.roles:
            if c in f.graph_outputs:
                return False
            for user in f.consumers.get(c, []):
                if user in pw.roles:
                    continue
                if user not in g.roles:
                    return False
                gather_data = f.data_args(user) if g.roles[user] == "gather" else ()
                # a same-position read: pw belongs in g's space, not before it; a single value
                # (T5's scalar_tensor fill of the mask) is the same at every position read
                if f.numel(c) > 1 and any(
                    v == c and f.flat[p] and p not in gather_data for p, v in f.reads[user]
                ):
                    return False
                feeds = True
        return feeds

    def _reads_ok(self, g: _Group) -> bool:
        f = self.f
        if not self._windows_read_one_tensor(g):
            return False
        for c, rc in g.roles.items():
            for p, v in f.reads[c]:
                h = f.home[v]
                rs = g.roles.get(h)
                if rs is None:
                    continue  # loaded from memory
                if not f.flat[p] and rs != "prologue":
                    return False
                if not self._pair_ok(g, c, rc, p, h, rs):
                    return False
        return True

    def _windows_read_one_tensor(self, g: _Group) -> bool:
        """A window op reads each element of its data several times, so the data is computed
        inside the window kernel only when that takes one load per position; data that reads
        more tensors (a conv's peeled bias and its output) is written out first, as Inductor's
        realize_hint does for pooling and upsampling."""
        f = self.f
        for c, role in g.roles.items():
            if role != "gather" or _packet(f.fg, c) not in WINDOW_OPS:
                continue
            loads: set[str] = set()
            stack = [f.value[p] for p in f.data_args(c)]
            seen: set[str] = set()
            while stack:
                v = stack.pop()
                h = f.home[v]
                if h in seen:
                    continue
                seen.add(h)
                if g.roles.get(h) == "prologue":
                    stack.extend(u for _p, u in f.reads[h])
                elif f.numel(v) > 1:
                    loads.add(v)
            if len(loads) > 1:
                return False
        return True

    def _pair_ok(self, g: _Group, c: str, rc: str, p: str, h: str, rs: str) -> bool:
        """May member c (role rc) read member h (role rs) through node p inside one kernel?"""
        f = self.f
        if rs == "gather":
            rs = "full"  # a gather's value is computed at the group's point like a pointwise op
        if rs == "prologue":  # computed at whichever position the reader reads
            return rc in ("prologue", "full", "reduce", "outer", "gather")
        if rc == "gather":
            if p in f.data_args(c):
                return rs == "prologue"
            # an index tensor shaped like the output is read at the output's own point
            return rs == "full" and tuple(f.shape[p]) == tuple(f.shape[c])
        if rs == "bcast":
            # evaluated at the group's point projected onto its shape: read directly only
            if not _broadcasts(f.shape[p], f.shape[c]):
                return False
            return rc == "bcast" or (rc == "full" and tuple(f.shape[c]) == g.shape)
        if rc == "full":
            if rs == "full":
                return True
            if rs in ("outer", "reduce"):
                return not self._split(g) and self._row_broadcast(g, tuple(f.shape[p]), tuple(f.shape[c]))
            return False
        if rc == "outer":
            return rs in ("outer", "reduce")
        if rc == "reduce":
            return rs == "full"
        if rc == "epilogue":
            return rs in ("anchor", "epilogue")
        return False

    def _split(self, g: _Group) -> bool:
        """A reduction that runs as two kernels: too few rows to fill the GPU, long rows."""
        if g.kind != "reduction":
            return False
        rows = g.numel // max(g.rnumel, 1)
        return rows < self.opt.split_max_rows and g.rnumel > self.opt.split_min_rnumel

    def _row_broadcast(self, g: _Group, read: tuple[int, ...], out: tuple[int, ...]) -> bool:
        """A per-row value read by a full member broadcasts along the row only."""
        if g.kind != "reduction":
            return False
        read = (1,) * (len(out) - len(read)) + read
        if len(read) != len(out):
            return False
        if not g.trailing:
            return out == g.shape and read == g.outer_shape
        for k in range(len(out) + 1):
            if _prod(out[k:]) == g.rnumel and all(s == 1 for s in read[k:]) and read[:k] == out[:k]:
                return True
        return False

    # -- merging --------------------------------------------------------------------------------

    def _merge(self, a: int, b: int, producer_first: bool) -> bool:
        if a == b:
            return False
        g = self._combine(self.groups[a], self.groups[b], producer_first)
        if g is None or not self._no_cycle(a, b):
            return False
        keep, drop = min(a, b), max(a, b)
        self.groups[keep] = g
        del self.groups[drop]
        for c in g.roles:
            self.gid[c] = keep
        self.links.add_edges_from((keep, s) for s in self.links.successors(drop) if s != keep)
        self.links.add_edges_from((p, keep) for p in self.links.predecessors(drop) if p != keep)
        self.links.remove_node(drop)
        return True

    def vertical(self) -> None:
        changed = True
        while changed:
            changed = False
            for c in self.f.kind:
                for user in self.f.consumers.get(c, []):
                    if self._merge(self.gid[c], self.gid[user], producer_first=True):
                        changed = True
            # getitems of multi-output producers: their consumers read the getitem value
            for v, users in self.f.consumers.items():
                h = self.f.home[v]
                if h == v or h not in self.gid:
                    continue
                for user in users:
                    if self._merge(self.gid[h], self.gid[user], producer_first=True):
                        changed = True

    def horizontal(self) -> None:
        changed = True
        while changed:
            changed = False
            for users in self.f.consumers.values():
                gids = sorted({self.gid[u] for u in users})
                for i, a in enumerate(gids):
                    for b in gids[i + 1 :]:
                        if a in self.groups and b in self.groups and self._merge(a, b, producer_first=False):
                            changed = True
                            break
                    if changed:
                        break

    # -- recompute or materialize ---------------------------------------------------------------

    def settle(self) -> tuple[list[Recomputed], list[Materialized]]:
        """Decide, for each value read by other groups, recompute there or write it out."""
        f = self.f
        recomputed: list[Recomputed] = []
        materialized: list[Materialized] = []
        for v in sorted(f.consumers, key=lambda n: f.order[n]):
            h = f.home[v]
            if h not in self.gid:
                continue
            home = self.gid[h]
            users = f.consumers[v]
            outside = sorted({self.gid[u] for u in users} - {home})
            if not outside or v in f.graph_outputs:
                continue
            decision = self._recompute_plan(v, outside)
            if isinstance(decision, tuple):
                roles_by_group, why = decision
                for gid, roles in roles_by_group.items():
                    for c, r in roles.items():
                        self.groups[gid].roles.setdefault(c, r)
                recomputed.append(Recomputed(v, tuple(outside), why))
                continue
            groups = ([home] if any(self.gid[u] == home for u in users) else []) + outside
            if f.kind[h] in OPAQUE or len(groups) < 2:
                continue  # extern outputs are in memory anyway; one reading kernel forks nothing
            materialized.append(Materialized(v, tuple(groups), f.bytes[v], decision))
        return recomputed, materialized

    def _cone(self, v: str, home: int) -> list[str]:
        """v's home node and its ancestors inside its group, in FX order."""
        f = self.f
        h = f.home[v]
        inside = f.deps.subgraph(self.groups[home].roles)
        return sorted(nx.ancestors(inside, h) | {h}, key=lambda n: f.order[n])

    def _recompute_plan(self, v: str, outside: list[int]) -> tuple[dict[int, dict[str, str]], str] | str:
        """(roles to add per reading group, why) when each reader can recompute v; else why not."""
        f = self.f
        cone = self._cone(v, self.gid[f.home[v]])
        cone_set = set(cone)
        heavy = [
            c
            for c in cone
            if f.kind[c] != "pointwise" and not self._table_lookup(c, cone_set) and not self._small_cat(c)
        ]
        if heavy:
            return f"depends on {heavy[-1]} ({f.kind[heavy[-1]]}) in its kernel: too costly to recompute"
        if len(cone) > self.opt.recompute_max_ops:
            return f"recomputing it takes {len(cone)} ops (> {self.opt.recompute_max_ops})"
        cone_reads = {u for c in cone for _p, u in f.reads[c] if f.home[u] not in cone_set}
        # Inductor counts every buffer a recomputation reads; a vector broadcast over the value
        # (BatchNorm's statistics and affine, a bias) costs a reader no traffic to speak of, so
        # only reads of more than 1/BROADCAST_READ of the value's points count here. BatchNorm
        # with its activation reads five tensors, one of them big: EfficientNet's BN-SiLU before
        # a squeeze-excite is then recomputed by the gate's multiply from the convolution's
        # output, in float32, instead of being written in bf16 and read back rounded.
        big_reads = [u for u in cone_reads if f.numel(u) * BROADCAST_READ > f.numel(v)]
        if len(big_reads) > self.opt.recompute_max_reads:
            return f"recomputing it reads {len(big_reads)} tensors (> {self.opt.recompute_max_reads})"
        plan: dict[int, dict[str, str]] = {}
        extra_bytes, saved = 0, f.bytes[v]
        for gid in outside:
            g = self.groups[gid]
            if g.kind in OPAQUE and not any(r == "epilogue" for r in g.roles.values()):
                users = [u for u in f.consumers[v] if self.gid[u] == gid]
                return f"read by {users[0]} ({f.kind[users[0]]}), which reads its inputs from memory"
            added = self._recompute_roles(g, [c for c in cone if c not in g.roles])
            if added is None:
                return f"{v} cannot be computed inside group {gid} ({g.kind} {g.shape})"
            already = self._group_reads(gid)
            extra_bytes += sum(self._read_bytes(u, cone) for u in cone_reads if u not in already)
            saved += f.bytes[v]
            plan[gid] = added
        why = (
            f"{len(cone)} pointwise op(s) over {len(cone_reads)} tensor(s): recomputing reads "
            f"{extra_bytes} new bytes instead of writing and reading {saved}"
        )
        return plan, why

    def _table_lookup(self, c: str, cone: set[str]) -> bool:
        """Is c a lookup (embedding, index_select) of a table read from memory? Recomputing it
        reads one row per point, as a pointwise op reads its input: Inductor recomputes GPT-2's
        ``wte(ids) + wpe(pos)`` in the residual add after attention instead of reading it back
        rounded to bf16."""
        return _packet(self.f.fg, c) in LOOKUPS and not set(self.f.data_args(c)) & cone

    def _small_cat(self, c: str) -> bool:
        """Is c a cat of few tensors that only pointwise ops read? Each point of it reads one of
        them, as a pointwise op reads its input: Inductor's GPU lowering makes such a cat (up to
        8 tensors) a pointwise op and recomputes it with its readers (ViT's
        ``cat([cls, patches]) + pos_embed``, read by the first LayerNorm and residual add)."""
        f = self.f
        return (
            _packet(f.fg, c) == "cat"
            and len(f.data_args(c)) <= self.opt.recompute_max_cat_inputs
            and all(f.kind[u] == "pointwise" for u in f.consumers.get(c, ()))
        )

    def _read_bytes(self, u: str, cone: list[str]) -> int:
        """Bytes recomputing `cone` reads of `u` (a value from outside it): a table only lookups
        in the cone read costs the rows they fetch, not the whole table."""
        f = self.f
        readers = [c for c in cone if any(x == u for _p, x in f.reads[c])]
        if readers and all(_packet(f.fg, c) in LOOKUPS and u in f.data_args(c) for c in readers):
            return sum(f.bytes[c] for c in readers)
        return f.bytes[u]

    def _recompute_roles(self, g: _Group, cone: list[str]) -> dict[str, str] | None:
        """Roles for recomputing `cone` inside g: in g's space (small tensors broadcast), else
        as a prologue at the positions g reads; None when neither makes one kernel."""
        f = self.f
        in_space: dict[str, str] = {}
        for c in cone:
            if f.kind[c] != "pointwise":
                break  # a table lookup is recomputed where it is read, as a prologue
            r = _role_in(f, g, c)
            if r is None and f.numel(c) < g.numel:
                r = "bcast"  # a small tensor (BatchNorm's scale, a scalar) broadcast into it
            if r is None:
                break
            in_space[c] = r
        attempts = [in_space] if len(in_space) == len(cone) else []
        attempts.append(dict.fromkeys(cone, "prologue"))
        for added in attempts:
            trial = _Group(g.kind, {**g.roles, **added}, g.shape, g.rdims, g.anchor)
            if len(trial.roles) <= self.opt.max_nodes and self._reads_ok(trial):
                return added
        return None

    def _group_reads(self, gid: int) -> set[str]:
        f = self.f
        g = self.groups[gid]
        return {u for c in g.roles for _p, u in f.reads[c] if f.home[u] not in g.roles}


# ---------------------------------------------------------------------------------------------


def plan(fg: FusionGraph, options: PlanOptions | None = None) -> FusionPlan:
    """Partition fg into kernels (see the module docstring for the shapes of the groups)."""
    options = options or PlanOptions()
    p = _Planner(fg, options)
    p.vertical()
    if options.horizontal:
        p.horizontal()
        # Siblings merged side by side may now take a producer they all read as their prologue
        # (T5's position bias: one lookup, copied into each layer's attention mask).
        p.vertical()
    recomputed, materialized = p.settle()
    return _freeze(p, recomputed, materialized, options)


def _freeze(p: _Planner, recomputed, materialized, options: PlanOptions) -> FusionPlan:
    f = p.f
    needed: dict[int, set[str]] = {gid: set(g.roles) for gid, g in p.groups.items()}
    # A node recomputed in every group that reads it needs no home computation; dropping one
    # node may free its producers, so repeat until nothing changes.
    changed = True
    while changed:
        changed = False
        for gid, cs in needed.items():
            for c in sorted(cs, key=lambda n: -f.order[n]):
                if _unused(f, gid, c, needed):
                    cs.discard(c)
                    changed = True
    live = {gid: cs for gid, cs in needed.items() if cs}
    first = {gid: min(f.order[c] for c in cs) for gid, cs in live.items()}
    where: dict[str, list[int]] = {}
    for gid in sorted(live, key=first.get):
        for c in live[gid]:
            where.setdefault(c, []).append(gid)

    # Each value read from memory is written by its home group, the one the planner put its node
    # in; another group may also compute it (recomputed as a prologue), and taking that one as the
    # writer can make two groups wait on each other (bilinear upsampling: the lerp group recomputes
    # the gather's indices and reads the gathered values). The first group that computes it serves
    # only when the home group no longer does.
    def writer(h: str) -> int:
        home = p.gid.get(h)
        return home if home in live and h in live[home] else where[h][0]

    dag = nx.DiGraph()
    dag.add_nodes_from(live)
    written: dict[int, set[str]] = {gid: set() for gid in live}
    inputs: dict[int, list[str]] = {gid: [] for gid in live}
    for gid, cs in live.items():
        for c in sorted(cs, key=f.order.get):
            for _node, v in f.reads[c]:
                h = f.home[v]
                if h in cs:
                    continue
                if h in where:
                    dag.add_edge(writer(h), gid)
                    written[writer(h)].add(v)
                if v not in inputs[gid]:
                    inputs[gid].append(v)
    for v in f.graph_outputs:
        if f.home.get(v) in where:
            written[writer(f.home[v])].add(v)
    order = list(nx.lexicographical_topological_sort(dag, key=first.get))
    new_id = {old: i for i, old in enumerate(order)}
    groups = []
    for old in order:
        cs, g = live[old], p.groups[old]
        nodes = set(cs)
        for c in cs:
            for node, v in f.reads[c]:
                _add_chain(f, node, nodes, stop=None if f.home[v] in cs else v)
        nodes |= {v for c in cs for v in f.values_of[c] if v != c}  # getitems of members
        roles = tuple((c, g.roles[c]) for c in sorted(cs, key=f.order.get))
        space = (g.numel // max(g.rnumel, 1), g.rnumel) if g.kind == "reduction" else (g.numel, 1)
        kind = g.kind
        if kind == "injective" and all(r != "gather" for _, r in roles):
            # every gather of the group is computed by the groups that read it (dropped above):
            # what is left is elementwise (a sibling merged side by side with a cat's group)
            kind = "pointwise"
        groups.append(
            FusionGroup(
                id=new_id[old],
                kind=kind,
                nodes=tuple(sorted(nodes, key=f.order.get)),
                inputs=tuple(sorted(inputs[old], key=f.order.get)),
                outputs=tuple(sorted(written[old], key=f.order.get)),
                recomputed=tuple(c for c, _ in roles if len(where[c]) > 1),
                roles=roles,
                shape=tuple(g.shape),
                reduce_dims=g.rdims if g.kind == "reduction" else (),
                space=space,
                launches=2 if p._split(g) else 1,
            )
        )
    mats = tuple(
        Materialized(m.node, tuple(new_id[x] for x in m.groups if x in new_id), m.bytes, m.reason)
        for m in materialized
    )
    recs = tuple(
        Recomputed(r.node, tuple(new_id[x] for x in r.groups if x in new_id), r.reason) for r in recomputed
    )
    return FusionPlan(
        graph=f.fg, groups=tuple(groups), materialized=mats, options=options, recomputations=recs
    )


def _unused(f: GraphFacts, gid: int, c: str, needed: dict[int, set[str]]) -> bool:
    """Group gid can skip c: it writes into no argument, no member of gid reads it, it is no
    graph output, and every other group that reads it computes it itself."""
    if _writes_in_place(f.fg.dag.nodes[c].get("fx")):
        return False
    for v in f.values_of[c]:
        if v in f.graph_outputs:
            return False
        for u in f.consumers.get(v, []):
            if u in needed[gid]:
                return False
            if any(u in cs and c not in cs for g2, cs in needed.items() if g2 != gid):
                return False
    return True


def _add_chain(f: GraphFacts, node: str, nodes: set[str], stop: str | None) -> None:
    """Add the views from `node` back to its value (the value itself only when computed here)."""
    while node != stop and f.fg.dag.nodes[node]["kind"] == "view":
        nodes.add(node)
        if f.value[node] == node:
            break
        node = f.fg.dag.nodes[node]["fx"].args[0].name
