"""An embedding table's gradient as one atomic scatter-add kernel.

Inductor's decomposition of `embedding_dense_backward` leaves a float32 zero table, a row mask
(index in bounds and not the padding index) and `_unsafe_masked_index_put_accumulate` of the
gradient rows into the table (torch 2.13; torch 2.11 masks the rows with `masked_fill` and
adds them with `index_put(accumulate=True)`). ATen runs either as a sorted `index_put_`:
index bounds checks, a radix sort of the indices and segment sums, 13-16 kernels per table
in GPT-2's training step (docs/NOTES.md), where Inductor generates one atomic scatter-add.
This pass does the same for the backend: each such op whose one index tensor picks rows of
a float32 table (and whose mask, if any, is one flag per row) becomes `fuselint::masked_index_add`,
which adds every kept row into the table with `tl.atomic_add`. A zero table is made by a
memset in the op; a cast of the rows to float32 is done in the kernel as it reads them.

Atomic adds meet in no fixed order, so the sums may differ from ATen's in the last bits from
call to call (as Inductor's do): under `torch.use_deterministic_algorithms(True)` the pass
leaves ATen's sorted, deterministic kernel in place.
"""

from __future__ import annotations

import torch
import torch.fx
import triton
import triton.language as tl

from fuselint.backend.runtime import HandKernel, can_generate_for, direct_impl

aten = torch.ops.aten
prims = torch.ops.prims


@triton.jit
def _add_rows(values, mask, index, out, dim, rows_out, HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    same = row + cols * 0  # the row's index and flag, read by every lane (one transaction)
    at = tl.load(index + same).to(tl.int64)
    at = tl.where(at < 0, at + rows_out, at)  # a negative index counts from the end, as in ATen
    # an index outside the table (ATen's kernel fails on it; the masked op's contract lets a
    # masked-out row carry any index) writes nothing rather than outside the table
    keep = (cols < dim) & (at >= 0) & (at < rows_out)
    if HAS_MASK:
        keep = keep & (tl.load(mask + same) != 0)
    x = tl.load(values + row.to(tl.int64) * dim + cols, mask=keep, other=0.0).to(tl.float32)
    tl.atomic_add(out + at * dim + cols, x, mask=keep)


ADD_ROWS = HandKernel(_add_rows, "embedding gradients")


@torch.library.custom_op("fuselint::masked_index_add", mutates_args=())
@direct_impl("fuselint::masked_index_add")
def masked_index_add(
    base: torch.Tensor | None,
    size: list[int],
    mask: torch.Tensor | None,
    index: torch.Tensor,
    values: torch.Tensor,
) -> torch.Tensor:
    """A float32 table of `size` (a copy of `base`, or zeros) with each row of `values` whose
    `mask` flag is set (every row without a mask) added at row `index` of it:
    `index_put(accumulate=True)` and `_unsafe_masked_index_put_accumulate` with one index
    tensor on dim 0 and a mask of one flag per index."""
    # the kernel adds row i at i * dim: the table is made contiguous, whatever the base's strides
    out = (
        torch.zeros(size, dtype=torch.float32, device=values.device)
        if base is None
        else base.to(torch.float32, memory_format=torch.contiguous_format, copy=True)
    )
    dim = out[0].numel() if out.dim() else 1
    at = index.reshape(-1).contiguous()
    flags = None if mask is None else mask.reshape(-1).contiguous()
    if at.numel() == 0 or dim == 0:
        return out
    rows = values.reshape(at.numel(), dim).contiguous()
    n = out.shape[0]
    if not can_generate_for(values.device):
        return _aten_add(out, at, flags, rows)
    block = min(1024, triton.next_power_of_2(dim))
    grid = (at.numel(), triton.cdiv(dim, block))
    flag_ptr = at if flags is None else flags.view(torch.uint8)
    if not ADD_ROWS.launch(grid, rows, flag_ptr, at, out, dim, n, HAS_MASK=flags is not None, BLOCK=block):
        return _aten_add(out, at, flags, rows)
    return out


def _aten_add(
    out: torch.Tensor, at: torch.Tensor, flags: torch.Tensor | None, rows: torch.Tensor
) -> torch.Tensor:
    """The same sums through ATen's sorted index_put (rows not kept add zeros at a clamped index,
    so nothing reads the mask on the host)."""
    n = out.shape[0]
    at = torch.where(at < 0, at + n, at)
    kept = (at >= 0) & (at < n)
    if flags is not None:
        kept &= flags.bool()
    out.view(n, -1).index_put_((at.clamp(0, n - 1),), rows.float() * kept.unsqueeze(1), accumulate=True)
    return out


@masked_index_add.register_fake
def _(
    base: torch.Tensor | None,
    size: list[int],
    mask: torch.Tensor | None,
    index: torch.Tensor,
    values: torch.Tensor,
) -> torch.Tensor:
    return values.new_empty(size, dtype=torch.float32)


def _zero_table(node: torch.fx.Node) -> bool:
    """`node` is `full(size, 0)` read by nothing else."""
    return (
        node.op == "call_function"
        and node.target is aten.full.default
        and node.args[1] == 0
        and len(node.users) == 1
    )


def _one_flag_per_row(mask: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> bool:
    """The mask holds one flag per index: aligned with the rows from the right, as broadcasting
    aligns it, its shape is the index's, then ones (the index's shape alone, beside rows of
    several columns, would flag columns)."""
    n, k = index.dim(), values.dim()
    if mask.dim() > k:
        return False
    aligned = (1,) * (k - mask.dim()) + tuple(mask.shape)
    return aligned[:n] == tuple(index.shape) and all(s == 1 for s in aligned[n:])


_INDEX_PUTS = (aten.index_put.default, aten._unsafe_index_put.default)


def _operands(node: torch.fx.Node):
    """(table, mask or None, index, values) of a row-wise accumulating index_put, else None."""
    if node.op != "call_function":
        return None
    if node.target is aten._unsafe_masked_index_put_accumulate.default:
        table, mask, indices, values = node.args
    elif node.target in _INDEX_PUTS and (node.args[3:4] or [node.kwargs.get("accumulate")])[0] is True:
        (table, indices, values), mask = node.args[:3], None
    else:
        return None
    if len(indices) != 1 or not isinstance(indices[0], torch.fx.Node):
        return None
    return table, mask, indices[0], values


def _replaceable(node: torch.fx.Node) -> bool:
    operands = _operands(node)
    if operands is None:
        return False
    table, mask, index, values = operands
    nodes = [table, index, values] + ([mask] if mask is not None else [])
    if not all(isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor) for a in nodes):
        return False
    t, i, v = (a.meta["val"] for a in (table, index, values))
    return (
        t.dtype == torch.float32
        and t.dim() >= 1
        and t.is_contiguous()  # the op returns a contiguous table: the graph's strides stay true
        and i.dtype in (torch.int64, torch.int32)
        and v.dtype.is_floating_point
        and tuple(v.shape) == tuple(i.shape) + tuple(t.shape[1:])
        and (
            mask is None
            or (mask.meta["val"].dtype == torch.bool and _one_flag_per_row(mask.meta["val"], i, v))
        )
        and can_generate_for(t.device)
    )


def scatter_index_adds(gm: torch.fx.GraphModule) -> int:
    """Turn gm's row-wise accumulating index_puts into `masked_index_add`; how many were."""
    if torch.are_deterministic_algorithms_enabled():
        return 0
    graph = gm.graph
    nodes = [n for n in graph.nodes if _replaceable(n)]
    for node in nodes:
        table, mask, index, values = _operands(node)
        cast = values
        size = list(table.meta["val"].shape)
        base = None if _zero_table(table) else table
        # a cast of the rows to float32 is done in the kernel as it loads them
        if (
            values.op == "call_function"
            and values.target is prims.convert_element_type.default
            and values.args[1] == torch.float32
            and len(values.users) == 1
        ):
            values = values.args[0]
        with graph.inserting_before(node):
            add = graph.call_function(
                torch.ops.fuselint.masked_index_add.default, (base, size, mask, index, values)
            )
        add.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(add)
        graph.erase_node(node)
        for dead in (cast, table):  # the cast and the zero table it no longer reads
            if not dead.users:
                graph.erase_node(dead)
    if nodes:
        gm.recompile()
    return len(nodes)
