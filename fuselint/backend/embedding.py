"""An embedding table's gradient as one atomic scatter-add kernel.

Inductor's decomposition of `embedding_dense_backward` leaves a float32 zero table, a row mask
(index in bounds and not the padding index) and `_unsafe_masked_index_put_accumulate` of the
gradient rows into the table. ATen runs that op as a sorted `index_put_` with accumulate:
index bounds checks, a radix sort of the indices and segment sums, 13-16 kernels per table
in GPT-2's training step (docs/NOTES.md), where Inductor generates one atomic scatter-add.
This pass does the same for the backend: each such op whose one index tensor picks rows of
a float32 table and whose mask is one flag per row becomes `fuselint::masked_index_add`,
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

from fuselint.backend.runtime import can_generate_for

aten = torch.ops.aten
prims = torch.ops.prims


@triton.jit
def _add_rows(values, mask, index, out, dim, rows_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    same = row + cols * 0  # the row's index and flag, read by every lane (one transaction)
    at = tl.load(index + same).to(tl.int64)
    flag = tl.load(mask + same)
    # a masked-out row may carry any index (the op's contract); an unmasked one outside the
    # table writes nothing rather than outside it
    keep = (cols < dim) & (flag != 0) & (at >= 0) & (at < rows_out)
    x = tl.load(values + row.to(tl.int64) * dim + cols, mask=keep, other=0.0).to(tl.float32)
    tl.atomic_add(out + at * dim + cols, x, mask=keep)


@torch.library.custom_op("fuselint::masked_index_add", mutates_args=())
def masked_index_add(
    base: torch.Tensor | None, size: list[int], mask: torch.Tensor, index: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    """A float32 table of `size` (a copy of `base`, or zeros) with each row of `values` whose
    `mask` flag is set added at row `index` of it: `_unsafe_masked_index_put_accumulate` with
    one index tensor on dim 0 and a mask of one flag per index."""
    out = (
        torch.zeros(size, dtype=torch.float32, device=values.device) if base is None else base.float().clone()
    )
    dim = out[0].numel() if out.dim() else 1
    flags = mask.reshape(-1).contiguous()
    at = index.reshape(-1).contiguous()
    if at.numel() == 0 or dim == 0:
        return out
    rows = values.reshape(at.numel(), dim).contiguous()
    if not can_generate_for(values.device):
        kept = (flags != 0) & (at >= 0) & (at < out.shape[0])
        out.view(out.shape[0], dim).index_put_((at[kept],), rows[kept].float(), accumulate=True)
        return out
    block = min(1024, triton.next_power_of_2(dim))
    grid = (at.numel(), triton.cdiv(dim, block))
    _add_rows[grid](rows, flags.view(torch.uint8), at, out, dim, out.shape[0], BLOCK=block)
    return out


@masked_index_add.register_fake
def _(
    base: torch.Tensor | None, size: list[int], mask: torch.Tensor, index: torch.Tensor, values: torch.Tensor
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


def _one_flag_per_row(mask: torch.Tensor, index: torch.Tensor, table: torch.Tensor) -> bool:
    """The mask holds one flag per index (its shape: the index's, then ones)."""
    n = index.dim()
    return tuple(mask.shape[:n]) == tuple(index.shape) and all(s == 1 for s in mask.shape[n:])


def _replaceable(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is not aten._unsafe_masked_index_put_accumulate.default:
        return False
    table, mask, indices, values = node.args
    if len(indices) != 1 or indices[0] is None:
        return False
    vals = [
        a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in (table, mask, indices[0], values)
    ]
    if not all(isinstance(v, torch.Tensor) for v in vals):
        return False
    t, m, i, v = vals
    return (
        t.dtype == torch.float32
        and t.dim() >= 1
        and m.dtype == torch.bool
        and i.dtype in (torch.int64, torch.int32)
        and v.dtype.is_floating_point
        and tuple(v.shape) == tuple(i.shape) + tuple(t.shape[1:])
        and _one_flag_per_row(m, i, t)
        and can_generate_for(t.device)
    )


def scatter_index_adds(gm: torch.fx.GraphModule) -> int:
    """Turn gm's row-wise `_unsafe_masked_index_put_accumulate` into `masked_index_add`; how many."""
    if torch.are_deterministic_algorithms_enabled():
        return 0
    graph = gm.graph
    nodes = [n for n in graph.nodes if _replaceable(n)]
    for node in nodes:
        table, mask, (index,), values = node.args
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
