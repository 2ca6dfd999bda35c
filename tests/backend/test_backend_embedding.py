"""An embedding table's gradient as one atomic scatter-add (fuselint/backend/embedding.py),
interpreter on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import Unlaunchable, aten_graph, needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.embedding import masked_index_add, scatter_index_adds
from fuselint.backend.runtime import HandKernel

pytestmark = needs_interpreter

aten = torch.ops.aten


def _rows(n: int, dim: int, dtype: torch.dtype, table: int = 10):
    g = torch.Generator().manual_seed(n * dim)
    index = torch.randint(0, table, (n,), generator=g)
    index[::3] = 4  # one row hit many times
    index[1] = 99  # out of the table, its flag unset: the op's contract lets it be anything
    index[2] = -2  # counts from the end, as in ATen
    mask = (index != 7) & (index < table)
    values = torch.randn(n, dim, generator=g).to(dtype)
    return index, mask, values


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("dim", [8, 1100])  # one block of columns; several (BLOCK is at most 1024)
def test_masked_index_add_matches_aten_on_repeated_masked_and_stray_indices(dtype, dim):
    index, mask, values = _rows(37, dim, dtype)
    zeros = torch.zeros(10, dim)
    want = aten._unsafe_masked_index_put_accumulate(zeros, mask.unsqueeze(1), [index], values.float())
    got = masked_index_add(None, [10, dim], mask.unsqueeze(1), index, values)
    assert got.dtype == torch.float32 and got.shape == (10, dim)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    base = torch.randn(10, dim)  # a table that is not zeros is added to, not replaced
    got = masked_index_add(base, [10, dim], mask.unsqueeze(1), index, values)
    torch.testing.assert_close(got, want + base, atol=1e-5, rtol=1e-5)


def lookup(table, ids):
    return F.embedding(ids, table, padding_idx=0).square().sum(-1)


def _train(f, dtype, upcast: bool = False):
    g = torch.Generator().manual_seed(0)
    table = torch.randn(50, 24, generator=g).to(dtype)
    table = (table.float() if upcast else table).requires_grad_()
    ids = torch.randint(0, 50, (4, 33), generator=g)
    ids[0, :5] = 0  # padding: no gradient
    ids[1] = 3  # one row hit 33 times
    f(table, ids).sum().backward()
    return table.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_embedding_backward_runs_the_scatter_add_and_matches_eager(dtype):
    torch._dynamo.reset()
    start = history_mark()
    got = _train(torch.compile(lookup, backend=fuselint_backend), dtype)
    backward = [r for r in reports_since(start) if "backward" in r.graph]
    assert backward, [r.graph for r in reports_since(start)]
    code = backward[0].graph_module.code
    assert "fuselint.masked_index_add" in code and "index_put" not in code, code
    assert got.dtype == dtype and torch.all(got[0] == 0)
    truth = _train(lookup, dtype, upcast=True)  # float32 math on the same (rounded) table
    if dtype == torch.float32:
        torch.testing.assert_close(got, truth, atol=1e-5, rtol=1e-5)
    else:  # rows summed in float32 and rounded once: no further from the truth than eager's sums
        torch.testing.assert_close(got.float(), truth, atol=0, rtol=1e-2)
        eager = _train(lookup, dtype)
        assert (got.float() - truth).abs().max() <= (eager.float() - truth).abs().max()


def test_deterministic_algorithms_keep_atens_sorted_kernel():
    torch._dynamo.reset()
    start = history_mark()
    torch.use_deterministic_algorithms(True)
    try:
        got = _train(torch.compile(lookup, backend=fuselint_backend), torch.float32)
    finally:
        torch.use_deterministic_algorithms(False)
    code = next(r for r in reports_since(start) if "backward" in r.graph).graph_module.code
    assert "masked_index_add" not in code and "index_put" in code  # torch 2.13: the masked op
    torch.testing.assert_close(got, _train(lookup, torch.float32))


def test_index_put_accumulate_of_rows_becomes_the_scatter_add():
    """torch 2.11's decomposition of the embedding gradient: masked_fill, then index_put."""
    index, mask, values = _rows(21, 16, torch.float32)
    index[1] = 5

    def add_rows(table, index, values):
        return torch.ops.aten.index_put(table, [index], values, True) * 2

    table = torch.randn(10, 16)
    gm = aten_graph(add_rows, table, index, values)
    assert scatter_index_adds(gm) == 1
    assert "masked_index_add" in gm.code and "index_put" not in gm.code
    torch.testing.assert_close(gm(table, index, values), add_rows(table, index, values))


def test_a_kernel_that_cannot_launch_leaves_the_sums_to_aten(monkeypatch, caplog):
    import fuselint.backend.embedding as emb

    monkeypatch.setattr(emb, "ADD_ROWS", HandKernel(Unlaunchable(), "embedding gradients"))
    index, mask, values = _rows(37, 8, torch.float32)
    want = aten._unsafe_masked_index_put_accumulate(torch.zeros(10, 8), mask.unsqueeze(1), [index], values)
    with caplog.at_level("WARNING", logger="fuselint.backend"):
        got = masked_index_add(None, [10, 8], mask.unsqueeze(1), index, values)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert "run through ATen: RuntimeError: no kernel here" in caplog.text


def test_a_table_laid_out_column_major_gets_its_rows_added_where_they_are():
    """The kernel writes rows at `index * dim`: a table whose rows are not contiguous in memory
    (a transposed graph input) must still get each row added to its own row."""
    index, mask, values = _rows(21, 6, torch.float32)
    index[1] = 5
    base = torch.randn(6, 10).t()  # (10, 6), column-major
    want = aten.index_put(base, [index], values, True)
    torch.testing.assert_close(masked_index_add(base, [10, 6], None, index, values), want)

    def add_rows(table, index, values):
        return torch.ops.aten.index_put(table.t(), [index], values, True) * 2

    gm = aten_graph(add_rows, base.t(), index, values)
    scatter_index_adds(gm)
    torch.testing.assert_close(gm(base.t(), index, values), add_rows(base.t(), index, values))


def test_a_mask_of_the_index_shape_flags_columns_and_stays_with_aten():
    """Broadcasting aligns a mask with the rows from the right: one of the index's shape beside
    rows of as many columns flags columns, not rows, and is no row mask for the kernel."""
    index = torch.tensor([1, 2, 2, 5])
    values = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([True, False, True, True])

    def add_rows(table, mask, index, values):
        return aten._unsafe_masked_index_put_accumulate(table, mask, [index], values) * 2

    table = torch.zeros(8, 4)
    gm = aten_graph(add_rows, table, mask, index, values)
    scatter_index_adds(gm)
    torch.testing.assert_close(gm(table, mask, index, values), add_rows(table, mask, index, values))
    rows = aten_graph(add_rows, table, mask.unsqueeze(1), index, values)
    assert scatter_index_adds(rows) == 1  # one flag per row: the kernel's
