"""Adversarial cases for recomputed table lookups (plan) and sunk matmuls (compiler): each
compiled against eager, forward and backward, with the kernel structure the change promises."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since

pytestmark = needs_interpreter

V, D, S, B = 40, 16, 8, 2


def _compile_and_compare(fn, *args):
    """fn compiled and eager on clones of args: outputs and (mutated) inputs equal."""
    torch._dynamo.reset()
    mark = history_mark()
    mine, theirs = [a.clone() for a in args], [a.clone() for a in args]
    got = torch.compile(fn, backend=fuselint_backend)(*mine)
    want = fn(*theirs)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for g, w in zip(mine, theirs, strict=True):
        torch.testing.assert_close(g, w, atol=0, rtol=0)
    return reports_since(mark)


def _lookup(kind: str, tables: dict, ids: torch.Tensor, idx3: torch.Tensor) -> torch.Tensor:
    if kind == "computed_ids":  # indices computed in the kernel that looks them up
        return F.embedding((ids * 7 + 3).clamp(0, V - 1), tables["wte"])
    if kind == "gather_dim1":  # a lookup along a dim other than the first
        return torch.gather(tables["t3"], 1, idx3)
    return F.embedding(ids, tables["wte"]) + F.embedding(torch.arange(S), tables["wpe"])


def _readers(kind: str, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if kind == "softmax_mid":  # a reduction over a middle dim reads it as a prologue
        return h.softmax(1) + h.sum(0)
    if kind == "max_first":  # and over the first, next to a matmul's epilogue
        return h.amax(0) + h + F.layer_norm(h, (D,)) @ w
    return h + F.layer_norm(h, (D,)) @ w


@pytest.mark.parametrize(
    ("lookup", "readers"),
    [
        ("computed_ids", "softmax_mid"),
        ("positions", "max_first"),
        # a gather's int64 index is as large as its rows, so recomputing reads more bytes than
        # writing the rows out saves; Inductor recomputes it anyway (it counts ops and reads, not
        # bytes), and so does the plan: a value recomputed enters its readers unrounded
        ("gather_dim1", "residual"),
    ],
)
def test_a_recomputed_lookup_gives_eagers_values_forward_and_backward(lookup, readers):
    torch.manual_seed(0)
    tables = {
        "wte": torch.randn(V, D, requires_grad=True),
        "wpe": torch.randn(S, D, requires_grad=True),
        "t3": torch.randn(B, V, D, requires_grad=True),
    }
    w = torch.randn(D, D, requires_grad=True)
    ids, idx3 = torch.randint(0, V, (B, S)), torch.randint(0, V, (B, S, D))

    def model(ids, idx3):
        h = _lookup(lookup, tables, ids, idx3)
        return _readers(readers, h * torch.sigmoid(h), w)

    leaves = [*tables.values(), w]
    torch._dynamo.reset()
    mark = history_mark()
    got = torch.compile(model, backend=fuselint_backend)(ids, idx3)
    got_grads = torch.autograd.grad(got.square().sum(), leaves, allow_unused=True)
    want = model(ids, idx3)
    want_grads = torch.autograd.grad(want.square().sum(), leaves, allow_unused=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for g, e in zip(got_grads, want_grads, strict=True):
        assert (g is None) == (e is None)
        if g is not None:
            torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    forward = reports_since(mark)[0]
    name = "gather" if lookup == "gather_dim1" else "embedding"
    readers_of_rows = [k.__name__ for k in forward.kernels if name in k.__name__]
    # the lookup runs again in each kernel that reads its value (the training forward may still
    # write computed indices out: the backward reads them)
    assert len(readers_of_rows) >= 2, [k.__name__ for k in forward.kernels]


def test_an_out_of_range_index_reads_zeros_where_eager_raises():
    # the backend's documented choice for lookups (lowering._embedding): recomputed lookups
    # keep it, both kernels reading the missing row as zeros
    torch.manual_seed(0)
    wte, w = torch.randn(V, D), torch.randn(D, D)

    def model(ids):
        h = F.embedding(ids, wte) + 1
        return h + F.layer_norm(h, (D,)) @ w

    ids = torch.randint(0, V, (B, S))
    ids[0, 3] = V + 5
    with pytest.raises(IndexError):
        model(ids)
    torch._dynamo.reset()
    got = torch.compile(model, backend=fuselint_backend)(ids)
    row = torch.ones(D)  # the zero row plus one, in both kernels
    torch.testing.assert_close(got[0, 3], row + F.layer_norm(row, (D,)) @ w, atol=1e-5, rtol=1e-5)
    ids[0, 3] = 0
    kept = torch.ones(B, S, dtype=torch.bool)
    kept[0, 3] = False
    torch.testing.assert_close(got[kept], model(ids)[kept], atol=1e-5, rtol=1e-5)


def test_a_matmul_of_an_input_mutated_later_reads_the_value_before_the_mutation():
    # x @ w is first read after x is changed in place and normalised by a kernel; the matmul
    # sinks toward that reader but must read x as it was (the copy_ stays at the graph's end)
    torch.manual_seed(0)
    w = torch.randn(D, D)

    def model(x):
        y = x @ w
        x.mul_(2)
        z = F.layer_norm(x, (D,))
        return z @ w + y

    reports = _compile_and_compare(model, torch.randn(S, D))
    nodes = [n for n in reports[-1].graph_module.graph.nodes if n.op == "call_function"]
    copies = [i for i, n in enumerate(nodes) if n.target is torch.ops.aten.copy_.default]
    reads_x = [
        i
        for i, n in enumerate(nodes)
        if n.target is torch.ops.aten.mm.default and n.args[0].op == "placeholder"
    ]
    assert len(copies) == 1 and len(reads_x) == 1 and reads_x[0] < copies[0]


def test_views_of_a_sunk_matmul_split_into_heads_keep_eagers_values():
    torch.manual_seed(0)
    w = torch.randn(D, 3 * D)

    def model(x):
        q, k, v = (x @ w).split(D, -1)
        p = torch.softmax(q @ k.transpose(0, 1), -1)
        return p @ v.relu(), k.sum(0)

    torch._dynamo.reset()
    x = torch.randn(S, D)
    got = torch.compile(model, backend=fuselint_backend)(x)
    want = model(x)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


def test_an_input_updated_in_place_by_a_kernel_is_not_recomputed_from_after_the_update():
    # b.add_(c) fused with c * 3, which a matmul reads first: that kernel runs early and writes
    # b; the residual kernel recomputes b + c from b and must not find it already updated
    torch.manual_seed(0)
    w = torch.randn(D, D)

    def model(x, b, c):
        b.add_(c)
        t = (c * 3).view(1, D) @ w
        return x * 2 + b + t

    _compile_and_compare(model, torch.randn(S, D), torch.randn(D), torch.randn(D))
