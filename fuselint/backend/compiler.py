"""Compile one ATen FX graph: kernels for the groups the codegen can lower, ATen for the rest.

For each group: hoist the views of its inputs out (they are free in ATen), find what it
reads and what leaves it, lower it (:mod:`lowering`), pick a launch config
(:mod:`heuristics`), write the kernel (:mod:`codegen`) and load it (:mod:`runtime`). A
group that does not lower is split into the longest runs that do; what is left runs
through ATen. The graph is then rebuilt with one call per kernel, emitting each unit
when something needs it, so ordering is always legal; if anything about the rebuild goes
wrong, the original graph runs unchanged.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.fx

from fuselint.backend.bias import unfuse_addmm_bias
from fuselint.backend.codegen import generate
from fuselint.backend.constants import fold_constants
from fuselint.backend.cse import merge_duplicates
from fuselint.backend.embedding import scatter_index_adds
from fuselint.backend.gemm_groups import join_small_gemms
from fuselint.backend.heuristics import choose_config
from fuselint.backend.kept_layouts import keep_layout_copies
from fuselint.backend.lowering import KernelIR, Unsupported, lower_group
from fuselint.backend.max_pool import hand_max_pools
from fuselint.backend.ops import REDUCTIONS, VIEWS, lowering_for
from fuselint.backend.pads import sink_pads
from fuselint.backend.partition import planner_groups
from fuselint.backend.patchify import patchify_convolutions
from fuselint.backend.precompile import precompile, start_workers_for
from fuselint.backend.random import seed_random
from fuselint.backend.repeats import repeats_as_cats
from fuselint.backend.runtime import FusedKernel, can_generate_for, interpreting, keeps_effects
from fuselint.backend.squeeze_excite import reduce_pooled_convolutions
from fuselint.backend.views import fold_input_views
from fuselint.graph.aliasing import is_view, storage_of, written_storages
from fuselint.graph.fusion_graph import FusionGraph
from fuselint.graph.layout import gpu_conv_layout, take_input_strides

log = logging.getLogger("fuselint.backend")


@dataclass
class PreparedGroup:
    nodes: list[torch.fx.Node]  # computed inside the kernel, topological order
    inputs: list[torch.fx.Node]
    outputs: list[torch.fx.Node]


@dataclass
class CompiledGroup:
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: FusedKernel


@dataclass
class CompileReport:
    """What one graph became: its kernels and the groups left to ATen (with why)."""

    graph: str
    kernels: list[FusedKernel] = field(default_factory=list)
    fallbacks: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    graph_module: torch.fx.GraphModule | None = None
    constants: list[str] = field(default_factory=list)  # nodes computed once, at compile time
    folded_views: int = 0  # kernel inputs read through a view's strides instead of a view op
    merged: int = 0  # nodes that repeated an earlier node's op on the same arguments
    joined: int = 0  # GEMMs run as part of another's (gemm_groups.join_small_gemms)
    kept: int = 0  # layout copies of weights made once and kept (kept_layouts.keep_layout_copies)
    reduced: int = 0  # convolutions of a pooled image run as reductions (squeeze_excite)
    # the cuDNN TF32 setting those reductions round as (None: none of them has one to follow)
    conv_tf32: bool | None = None
    replay: object | None = None  # its GraphReplay under options={"cudagraphs": True}
    runner: object | None = None  # its GraphRunner (the generated call function, once built)
    precompiled: int = 0  # kernel launches compiled on the thread pool before the first call
    worker_compiled: int = 0  # of them, compiled by the worker processes (found in Triton's cache)


# Why a group (or a node alone) is no kernel when all its values are read inside it, or
# recomputed by the other groups that read them.
NOTHING_LEAVES = "nothing leaves the group"

# The latest compiled graphs, for tests, `verify` and the benchmark to inspect.
history: list[CompileReport] = []
_HISTORY_LIMIT = 64
_compiled_total = 0


def history_mark() -> int:
    """A mark to pass to :func:`reports_since` later."""
    return _compiled_total


def reports_since(mark: int) -> list[CompileReport]:
    """The reports of the graphs compiled after `mark` (the most recent 64 at most)."""
    count = _compiled_total - mark
    return history[-count:] if count > 0 else []


def _is_tuple(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (tuple, list))


def prepare_group(
    gm: torch.fx.GraphModule,
    names: tuple[str, ...],
    owned: set[str] | frozenset[str] = frozenset(),
    elsewhere: Mapping[str, frozenset[str]] | None = None,
) -> PreparedGroup:
    """The kernel's nodes, inputs and outputs for the group `names` of `gm`. `elsewhere` maps a
    member that other groups recompute to those groups' nodes: its readers there need no copy
    from this kernel (BatchNorm's backward recomputes ``x - mean`` in fp32 where it is read,
    rather than write it out beside its sums and read it back)."""
    elsewhere = elsewhere or {}
    by_name = {n.name: n for n in gm.graph.nodes}
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    members = {by_name[n] for n in names}
    for n in names:  # a kernel that writes an input runs before readers that recompute from it
        dst = by_name[n].args[0] if by_name[n].target is torch.ops.aten.copy_.default else None
        if isinstance(dst, torch.fx.Node) and any(u.name in elsewhere for u in dst.users):
            raise Unsupported(f"copy_ into {dst.name}, from which another kernel recomputes a value")
    # getitems of a member's tuple belong with it.
    for n in list(members):
        for u in n.users:
            if u.target is operator.getitem:
                members.add(u)
    nodes = sorted(members, key=order.__getitem__)
    # Views (and getitems) of values computed outside are just inputs, read through strides.
    for n in nodes:
        if (is_view(n) or n.target is operator.getitem) and not any(a in members for a in n.all_input_nodes):
            members.discard(n)
    nodes = [n for n in nodes if n in members]
    if not any(not is_view(n) and n.target is not operator.getitem for n in nodes):
        raise Unsupported("only views")
    inputs: list[torch.fx.Node] = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in members and a not in inputs:
                if not isinstance(a.meta.get("val"), torch.Tensor):
                    raise Unsupported(f"input {a.name} is not a tensor")
                inputs.append(a)
    graph_out = {a for n in gm.graph.nodes if n.op == "output" for a in n.all_input_nodes}
    outputs: list[torch.fx.Node] = []
    for n in nodes:
        there = elsewhere.get(n.name, frozenset())
        if _is_tuple(n) or not (
            n in graph_out or any(u not in members and u.name not in there for u in n.users)
        ):
            continue
        base = n
        while is_view(base) and base.all_input_nodes[0] in members:
            base = base.all_input_nodes[0]
        if base.name not in owned and base not in outputs and not is_view(base):
            outputs.append(base)
    if not outputs and not any(n.target is torch.ops.aten.copy_.default for n in nodes):
        raise Unsupported(NOTHING_LEAVES)
    return PreparedGroup(nodes, inputs, sorted(outputs, key=order.__getitem__))


def group_module(gm: torch.fx.GraphModule, group: PreparedGroup) -> torch.fx.GraphModule:
    """The group's ATen nodes as a GraphModule: inputs in, tuple of outputs out."""
    g = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for a in group.inputs:
        env[a] = g.placeholder(a.name)
    for n in group.nodes:
        env[n] = g.node_copy(n, lambda a: env[a])
    g.output(tuple(env[o] for o in group.outputs))
    return torch.fx.GraphModule(gm, g)


def lower_prepared(group: PreparedGroup) -> KernelIR:
    """The kernel IR of a prepared group (raises Unsupported)."""
    ir = lower_group(group.nodes, group.inputs, group.outputs)
    if not can_generate_for(ir.device):
        raise Unsupported(f"no Triton target for device {ir.device}")
    return ir


def build_kernel(
    gm: torch.fx.GraphModule,
    group: PreparedGroup,
    ir: KernelIR | None = None,
    max_persistent: int | None = None,
) -> FusedKernel:
    """Generate and load the kernel of a prepared group."""
    ir = ir or lower_prepared(group)
    cfg = choose_config(ir, interpreting(ir.device), max_persistent)
    source, name = generate(ir, cfg)
    return FusedKernel(ir, cfg, source, name, group_module(gm, group))


def _compile_groups(
    gm: torch.fx.GraphModule, groups: list[tuple[str, ...]], report: CompileReport
) -> list[CompiledGroup]:
    """The groups' kernels. A value that several groups compute is written out by none of them
    when each has its readers recompute it; where those readers end up in ATen (no kernel takes
    them), ATen computes the value again from the graph: ops that a kernel had already run, and,
    for a value drawn from random numbers, other numbers (the fallback's hash, not tl.rand's).
    Then the groups compile again, writing those values out; if values drawn from random numbers
    are still computed again, they compile once more writing out every value they share."""
    kernels, fallbacks = len(report.kernels), len(report.fallbacks)
    compiled = _compile_groups_once(gm, groups, report, frozenset())
    # computed again by ATen: values kernels compute but do not write out, and nodes that no
    # kernel took because their readers in other groups were to recompute them
    dropped = {n for names, why in report.fallbacks[fallbacks:] if why == NOTHING_LEAVES for n in names}
    again = _recomputed_in_aten(gm, compiled) | dropped
    if not again:
        return compiled
    drawn = _random_descendants(gm)
    for written in (again, {name for names in groups for name in names}):
        del report.kernels[kernels:], report.fallbacks[fallbacks:]
        compiled = _compile_groups_once(gm, groups, report, written)
        if not _recomputed_in_aten(gm, compiled) & drawn:
            break
    return compiled


def _recomputed_in_aten(gm: torch.fx.GraphModule, compiled: list[CompiledGroup]) -> set[str]:
    """The values (not views) that kernels compute but do not write out, and that ATen ops or
    other kernels read: rebuild has ATen compute them again."""
    by_name = {n.name: n for n in gm.graph.nodes}
    internal = {n for cg in compiled for n in cg.nodes}
    written = {o for cg in compiled for o in cg.outputs}
    stack = [i for cg in compiled for i in cg.inputs]
    stack += [a.name for n in gm.graph.nodes if n.name not in internal for a in n.all_input_nodes]
    seen: set[str] = set()
    out: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen or name not in internal or name in written:
            continue
        seen.add(name)
        node = by_name[name]
        if is_view(node):  # a view costs nothing: what it reads is computed again
            stack.extend(a.name for a in node.all_input_nodes)
        else:
            out.add(name)
    return out


def _compile_groups_once(
    gm: torch.fx.GraphModule,
    groups: list[tuple[str, ...]],
    report: CompileReport,
    written: frozenset[str] | set[str],
) -> list[CompiledGroup]:
    owned: set[str] = set()
    compiled: list[CompiledGroup] = []
    # Nodes the plan computes in several groups (recomputed where they are read), and where;
    # those in `written` are written out whoever else computes them.
    holders: dict[str, list[int]] = {}
    for i, names in enumerate(groups):
        for name in names:
            if name not in written:
                holders.setdefault(name, []).append(i)

    def attempt(names: tuple[str, ...], home: int) -> tuple[PreparedGroup, KernelIR]:
        elsewhere = {
            name: frozenset(m for j in holders[name] if j != home for m in groups[j])
            for name in names
            if len(holders.get(name, ())) > 1
        }
        group = prepare_group(gm, names, owned, elsewhere)
        return group, lower_prepared(group)

    def accept(found: tuple[PreparedGroup, KernelIR]) -> None:
        group, ir = found
        try:
            kernel = build_kernel(gm, group, ir)
        except Exception as exc:  # no triton, an unwritable cache...: this group stays ATen
            log.warning("fuselint: cannot build a kernel for %s (%s)", ir.op_names, exc)
            report.fallbacks.append((tuple(n.name for n in group.nodes), f"{type(exc).__name__}: {exc}"))
            return
        names = [n.name for n in group.nodes]
        cg = CompiledGroup(
            tuple(names), tuple(n.name for n in group.inputs), tuple(n.name for n in group.outputs), kernel
        )
        compiled.append(cg)
        owned.update(cg.outputs)
        report.kernels.append(kernel)

    for gi, names in enumerate(groups):
        try:
            found = attempt(names, gi)
        except Unsupported as why:
            log.debug("group %s does not lower whole (%s); splitting", names, why)
        else:
            accept(found)
            continue
        # Split into the longest runs that lower; what no run takes stays in ATen.
        for part in _split_parts(gm, names):
            run: list[str] = []
            last: tuple[PreparedGroup, KernelIR] | None = None
            i = 0
            while i < len(part):
                # a node may lower only with the next few (a cat piece with its cat)
                took = 0
                for ahead in range(1, LOOKAHEAD + 2):
                    try:
                        last = attempt((*run, *part[i : i + ahead]), gi)
                    except Unsupported:
                        continue
                    took = ahead
                    break
                if took:
                    run.extend(part[i : i + took])
                    i += took
                    continue
                if run:  # close the run; the node starts the next one
                    accept(last)
                    run, last = [], None
                    continue
                try:  # not even alone: it stays an ATen op
                    attempt((part[i],), gi)
                except Unsupported as single:
                    if str(single) != "only views":  # views cost nothing in ATen
                        report.fallbacks.append(((part[i],), str(single)))
                i += 1
            if last is not None:
                accept(last)
    return compiled


def _random_descendants(gm: torch.fx.GraphModule) -> set[str]:
    """The nodes of `gm` computed from random numbers (fuselint's philox_rand, or an ATen op
    that draws from torch's generator)."""
    out: set[str] = set()
    for n in gm.graph.nodes:  # topological order: a node's inputs come first
        target = n.target
        draws = target is torch.ops.fuselint.philox_rand.default or (
            isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags
        )
        if draws or any(a.name in out for a in n.all_input_nodes):
            out.add(n.name)
    return out


# How many following nodes a split tries with a node that does not join its run alone.
LOOKAHEAD = 3


def _split_parts(gm: torch.fx.GraphModule, names: tuple[str, ...]) -> list[list[str]]:
    """The parts a pointwise group that does not lower whole is split in, each in graph order:
    first the small tables it computes from small data only (with what they need from the
    group), then the rest. RoPE's cos/sin tables are computed over (seq, dim) before they broadcast over
    (batch, heads, seq, dim); split in graph order, the cut fell after `q * cos`, which then ran
    in the tables' kernel and left the rotary chain in two. Reduction groups keep graph order."""
    by_name = {n.name: n for n in gm.graph.nodes}
    sizes = {}
    for name in names:
        node = by_name[name]
        if (
            isinstance(node.target, torch._ops.OpOverload)
            and node.target.overloadpacket.__name__ in REDUCTIONS
        ):
            return [list(names)]
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape):
            sizes[name] = math.prod(val.shape)
    if not sizes:
        return [list(names)]
    big = max(sizes.values())

    def numel(node: torch.fx.Node) -> int:
        val = node.meta.get("val")
        return math.prod(val.shape) if isinstance(val, torch.Tensor) else 0

    # small-sourced: computed only from data at most 1/16 of the group's largest value (tables
    # built from positions and frequencies), through members of the group
    small: dict[str, bool] = {}
    for name in names:
        small[name] = all(
            small.get(a.name, False) if a.name in small else numel(a) * 16 <= big
            for a in by_name[name].all_input_nodes
        )
    first = {name for name in names if small[name] and sizes.get(name, big) < big}
    members = set(names)
    stack = list(first)
    while stack:
        for a in by_name[stack.pop()].all_input_nodes:
            if a.name in members and a.name not in first:
                first.add(a.name)
                stack.append(a.name)
    parts = [[n for n in names if n in first], [n for n in names if n not in first]]
    return [part for part in parts if part]


class _Cycle(Exception):
    pass


def rebuild(gm: torch.fx.GraphModule, compiled: list[CompiledGroup]) -> torch.fx.GraphModule:
    """`gm` with each compiled group replaced by one call to its kernel."""
    by_name = {n.name: n for n in gm.graph.nodes}
    owner: dict[str, CompiledGroup] = {}
    internal: set[str] = set()
    for cg in compiled:
        internal.update(cg.nodes)
        for o in cg.outputs:
            owner.setdefault(o, cg)
        if cg.kernel.writes_inputs:  # its copy_ nodes: running the kernel performs them
            for n in cg.nodes:
                if by_name[n].target is torch.ops.aten.copy_.default:
                    owner.setdefault(n, cg)
    g = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}

    def demand(root: str) -> None:
        stack, expanded = [root], set()
        while stack:
            name = stack[-1]
            if name in env:
                stack.pop()
                continue
            cg = owner.get(name)
            deps = cg.inputs if cg else tuple(a.name for a in by_name[name].all_input_nodes)
            missing = [d for d in deps if d not in env]
            if missing:
                key = id(cg) if cg else name
                if key in expanded:
                    raise _Cycle(name)
                expanded.add(key)
                stack.extend(missing)
                continue
            if cg:
                call = g.call_function(cg.kernel, tuple(env[i] for i in cg.inputs))
                for k, o in enumerate(cg.outputs):
                    item = g.call_function(operator.getitem, (call, k))
                    item.meta = dict(by_name[o].meta)
                    env[o] = item
                for n in cg.nodes:  # copy_ returns the input it wrote
                    if owner.get(n) is cg and n not in cg.outputs:
                        env[n] = env[by_name[n].args[0].name]
            else:
                env[name] = g.node_copy(by_name[name], lambda a: env[a.name])
            stack.pop()

    out_node = None
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            env[n.name] = g.node_copy(n, lambda a: env[a.name])
        elif n.op == "output":
            out_node = n
        elif n.name not in internal or n.name in owner:
            demand(n.name)
    if out_node is not None:
        for a in out_node.all_input_nodes:
            demand(a.name)
        g.output(torch.fx.map_arg(out_node.args[0], lambda a: env[a.name]))
    g.eliminate_dead_code(is_impure_node=keeps_effects)
    return torch.fx.GraphModule(gm, g)


_SINKABLE_MATMULS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten.baddbmm.default,
}


def sink_matmuls(gm: torch.fx.GraphModule) -> int:
    """Move each matmul (and the views of its result) to just before its first reader, so that
    the reader finds the result still in L2 (BERT's value projection ran before the scores'
    GEMM and softmax, ~30 MB later, and its copy to fp32 took 7.3 µs against 5.6 when read
    right after it). Matmuls are pure, so any order their readers keep computes the same. A
    matmul moves only where its inputs are still alive there anyway, or where those it keeps
    alive longer take no more bytes than its result, which it now allocates later: between the
    two places no more memory is held, though while the moved matmul runs its inputs add to what
    is alive there (review17: +16 KB on a 1 MB probe, `scripts/review17_sink_peak.py`). LLaMA's
    value projection moves past the rotary kernel of the query and key, so that the copy of the
    values into the cache finds them in L2. Never past a write to its inputs, nor to the graph's
    end (a training backward's weight gradients stay where they free their inputs). Returns how
    many nodes moved."""
    moved = 0
    for n in reversed(list(gm.graph.nodes)):
        if n.op != "call_function" or not _matmul_or_its_view(n) or not n.users:
            continue
        order = {node: i for i, node in enumerate(gm.graph.nodes)}
        first = min(n.users, key=order.__getitem__)
        # a view shares its matmul's storage, which moves with it
        live = is_view(n) or _bytes_held_longer(n, order[first], order) <= _nbytes(n)
        if n.next is not first and first.op != "output" and live and not _written_before(n, first):
            first.prepend(n)
            moved += 1
    if moved:
        gm.recompile()
    return moved


def _written_before(n: torch.fx.Node, first: torch.fx.Node) -> bool:
    """Whether a node between n and `first` writes what n reads (make_fx keeps `y.add_(1)`; a
    kernel that stores into its inputs counts as writing all of them)."""
    between = []
    m = n.next
    while m is not first:
        between.append(m)
        m = m.next
    written = written_storages(between)
    for m in between:
        if getattr(m.target, "writes_inputs", False):
            written.update(storage_of(a) for a in m.all_input_nodes)
    return any(storage_of(a) in written for a in n.all_input_nodes)


def _nbytes(n: torch.fx.Node) -> int:
    val = n.meta.get("val")
    return val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0


def _bytes_held_longer(n: torch.fx.Node, at: int, order: dict) -> int | float:
    """The bytes of n's inputs that moving n to position `at` keeps alive longer: those no other
    node reads there or later (graph inputs are alive throughout). A view holds no memory of its
    own: it counts as alive where what it views is (a Linear on a 3-d input reads its tokens
    through a 2-d view that only the matmul reads)."""
    held: int | float = 0
    for a in n.all_input_nodes:
        if a.op in ("placeholder", "get_attr"):
            continue
        if is_view(a):
            held += _bytes_held_longer(a, at, order)
        elif not any(order[u] >= at for u in a.users if u is not n):
            held += _nbytes(a) if isinstance(a.meta.get("val"), torch.Tensor) else math.inf
    return held


def _matmul_or_its_view(n: torch.fx.Node) -> bool:
    while is_view(n) and n.all_input_nodes:
        n = n.all_input_nodes[0]
    return n.op == "call_function" and n.target in _SINKABLE_MATMULS


def _static(example_inputs: list) -> bool:
    for x in example_inputs:
        if isinstance(x, torch.SymInt | torch.SymFloat):
            return False
        if isinstance(x, torch.Tensor) and not all(isinstance(s, int) for s in x.shape):
            return False
    return True


DATA_SIZED = "a size only the data decides (unbacked)"


def _unbacked(val: object) -> bool:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return val is not None and any(free_unbacked_symbols(v) for v in torch.utils._pytree.tree_leaves(val))


def _generable(n: torch.fx.Node) -> bool:
    """A pointwise op or a reduction the codegen knows: what a static piece is compiled for."""
    if n.op != "call_function":
        return False
    packet = getattr(getattr(n.target, "overloadpacket", None), "__name__", "")
    return packet in REDUCTIONS or (lowering_for(n.target) is not None and packet not in VIEWS)


class _Piece(torch.nn.Module):
    """A static run of a data-sized graph's nodes, compiled, called from the split graph."""

    def __init__(self, runner: object) -> None:
        super().__init__()
        self.runner = runner

    def forward(self, *args: object) -> object:
        return self.runner(*args)


def _static_pieces(
    gm: torch.fx.GraphModule, name: str, inference: bool, report: CompileReport
) -> torch.fx.GraphModule | None:
    """`gm` split at its data-sized nodes: each run of nodes that neither makes nor reads a value of
    an unbacked size is compiled as a graph of its own (kernels), and ATen runs the rest. FL106's fix
    keeps a MoE layer's token gathering in the graph (hit_loops, unbacked_ops); without the split the
    attention and norms around it lost their kernels too. None where nothing static is left to
    compile (ATen then runs the whole graph)."""
    from torch.fx.passes.split_module import split_module

    from fuselint.backend.callgen import GraphRunner

    sized: set[str] = set()
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module") and (
            _unbacked(n.meta.get("val")) or any(_unbacked(a.meta.get("val")) for a in n.all_input_nodes)
        ):
            sized.add(n.name)
    runs: list[tuple[bool, list[torch.fx.Node]]] = []
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output", "get_attr"):
            continue
        here = n.name in sized
        if runs and runs[-1][0] == here:
            runs[-1][1].append(n)
        else:
            runs.append((here, [n]))
    parts: dict[str, int] = {}
    dynamic: dict[int, bool] = {}
    part, before = 0, None
    for here, nodes in runs:
        # a static run with nothing a kernel computes (views, items, matmuls) stays with ATen: as a
        # piece of its own it would only add a call
        here = here or not any(_generable(n) for n in nodes)
        if before is not None and here != before:
            part += 1
        for n in nodes:
            parts[n.name] = part
        dynamic[part], before = here, here
    static_parts = [p for p, d in dynamic.items() if not d]
    if not static_parts:
        return None
    for n in gm.graph.nodes:  # a constant goes with its first reader
        if n.op == "get_attr":
            parts[n.name] = min((parts[u.name] for u in n.users if u.name in parts), default=0)
    split = split_module(gm, gm, lambda n: parts[n.name], keep_original_order=True)
    global _compiled_total
    pieces: list[CompileReport] = []
    for node in split.graph.nodes:
        if node.op != "call_module" or dynamic.get(int(node.target.rsplit("_", 1)[1]), True):
            continue
        sub = getattr(split, node.target)
        examples = [p.meta.get("val") for p in sub.graph.nodes if p.op == "placeholder"]
        if any(not isinstance(v, torch.Tensor) or _unbacked(v) for v in examples):
            continue  # a number or a data-sized value crosses in: ATen runs the piece
        compiled = compile_graph(sub, examples, name=f"{name}.{node.target}", inference=inference)
        setattr(split, node.target, _Piece(GraphRunner(compiled, f"{name}.{node.target}")))
        # the piece's report (the last one: a piece splits no further) is this graph's, not a graph of
        # its own; taken at once, as the history keeps only the latest 64 and a MoE graph has more pieces
        pieces.append(history.pop())
        _compiled_total -= 1
    done = len(pieces)
    if report in history:
        history.remove(report)
    history.append(report)
    for piece in pieces:
        report.kernels.extend(piece.kernels)
        report.fallbacks.extend(piece.fallbacks)
        report.constants.extend(piece.constants)
        if piece.conv_tf32 is not None:  # the whole graph follows the setting (backend.TF32Switch)
            report.conv_tf32 = piece.conv_tf32
    aten = tuple(n.name for n in gm.graph.nodes if n.name in sized)
    why = f"{DATA_SIZED}: ATen runs its {len(aten)} data-sized nodes, {done} static pieces compiled"
    log.warning("fuselint: %s: %s", name, why)
    report.fallbacks.append((aten, why))
    split.fuselint_data_sized = next(n.name for n in gm.graph.nodes if n.name in sized)
    out = next(n for n in reversed(split.graph.nodes) if n.op == "output")
    out.meta = dict(next(n for n in reversed(gm.graph.nodes) if n.op == "output").meta)
    split.recompile()
    report.graph_module = split
    return split


def data_sized_node(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first node whose value has a size only the data decides (an unbacked symbol: `nonzero`,
    a mask read, or a custom op whose fake gives one, FL106's fix). The planner prices bytes and
    the codegen sizes grids from concrete shapes, so such a graph is not generated: ATen runs it."""
    return next((n for n in gm.graph.nodes if _unbacked(n.meta.get("val"))), None)


def _why_aten(gm: torch.fx.GraphModule, example_inputs: list) -> str | None:
    """Why ATen runs the whole of `gm` instead of generated kernels, or None."""
    data_sized = data_sized_node(gm)
    if data_sized is not None:
        return f"{DATA_SIZED} at {data_sized.name} ({data_sized.target}): ATen runs the graph"
    if not _static(example_inputs) or not _has_target(gm):
        return "no static shapes or no Triton device"
    return None


def _has_target(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and can_generate_for(val.device):
            return True
    return False


def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: list,
    name: str = "graph",
    *,
    inference: bool = True,
    user_outputs: range | None = None,
    static: frozenset[int] = frozenset(),
    keep_weights: bool = True,
) -> torch.fx.GraphModule:
    """`gm` with its fusible groups running as generated Triton kernels (its convolutions laid
    out as Inductor lays them out on a GPU, so that the plan is the one `check` prices).
    `keep_weights`: an inference graph may keep values made from its parameters between calls
    (joined GEMM weights, weights' layout copies), remade when a weight's version changes."""
    global _compiled_total
    report = CompileReport(name)
    history.append(report)
    _compiled_total += 1
    del history[:-_HISTORY_LIMIT]
    why = _why_aten(gm, example_inputs)
    if why is not None and why.startswith(DATA_SIZED) and _has_target(gm) and _static(example_inputs):
        pieces = _static_pieces(gm, name, inference, report)
        if pieces is not None:
            return pieces
    if why is not None:  # the backend is never wrong: what it cannot generate, ATen runs
        if why.startswith(DATA_SIZED):
            log.warning("fuselint: %s: %s", name, why)
        report.fallbacks.append((tuple(n.name for n in gm.graph.nodes), why))
        report.graph_module = gm
        return gm
    start_workers_for(example_inputs)
    take_input_strides(gm, example_inputs)
    report.merged = merge_duplicates(gm)
    seed_random(gm)
    scatter_index_adds(gm)
    hand_max_pools(gm)
    if inference:
        patchify_convolutions(gm)
        report.joined = join_small_gemms(gm, static) if keep_weights else 0
    gm = gpu_conv_layout(gm, inference=inference, user_outputs=user_outputs, eager=False)
    if inference:  # after the layout pass, whose channels_last choice counts these convolutions too
        report.reduced, report.conv_tf32 = reduce_pooled_convolutions(gm)
    sink_pads(gm)
    repeats_as_cats(gm)
    unfuse_addmm_bias(gm)
    if inference and keep_weights:  # a training graph's weights change every step: copied per call
        report.kept = keep_layout_copies(gm, static)
    fg = FusionGraph.from_fx(gm, name=name)
    compiled = _compile_groups(gm, planner_groups(fg), report)
    try:
        new_gm = rebuild(gm, compiled)
    except _Cycle as cycle:
        log.warning("fuselint: groups form a cycle at %s; running the graph through ATen", cycle)
        report.kernels.clear()
        report.fallbacks.append((tuple(n.name for n in gm.graph.nodes), "cycle between groups"))
        new_gm = gm
    else:
        try:
            report.constants = fold_constants(new_gm)
        except Exception as exc:  # a constant that cannot run now: it stays per call
            log.warning("fuselint: constants stay per call (%s: %s)", type(exc).__name__, exc)
        report.folded_views = fold_input_views(new_gm)
        sink_matmuls(new_gm)
    # Kernels of dead code were compiled but are not called; the report lists live ones.
    live = {id(n.target) for n in new_gm.graph.nodes if n.op == "call_function"}
    report.kernels = [k for k in report.kernels if id(k) in live]
    report.graph_module = new_gm
    try:
        report.precompiled, report.worker_compiled = precompile(report.kernels)
    except Exception as exc:  # a head start only: each kernel still compiles at its first launch
        log.warning("fuselint: parallel compile skipped (%s: %s)", type(exc).__name__, exc)
    return new_gm
