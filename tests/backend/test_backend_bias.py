"""A float32 addmm read only pointwise becomes mm plus a bias add at each reader, through the
views between them, so the add joins the reader's kernel (fuselint/backend/bias.py); on CPU
through Triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_helpers import needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since

pytestmark = needs_interpreter

aten = torch.ops.aten


def gelu_proj(x, w, b):
    return F.gelu(F.linear(x, w, b))


def heads(x, w, b):  # viewed, split into heads and permuted, then copied (BERT's query)
    return F.linear(x, w, b).view(4, 8, 32).view(4, 8, 2, 16).permute(0, 2, 1, 3).contiguous() * 0.5


def residual_norm(x, w, b):  # viewed to the batch's shape, then added to the stream and normed
    y = F.linear(x, w, b).view(4, 8, 32)
    return F.layer_norm(y + x.view(4, 8, 24).sum(-1, keepdim=True), (32,)), torch.tanh(y[:, 0])


def scores(x, w, b):  # a matmul reads the result: the addmm stays whole
    y = F.linear(x, w, b)
    return y @ y.t()


def _run(fn, dtype):
    torch._dynamo.reset()
    mark = history_mark()
    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g).to(dtype) for s in ((32, 24), (32, 24), (32,)))
    got = torch.compile(fn, backend=fuselint_backend)(x, w, b)
    (report,) = reports_since(mark)
    targets = [n.target for n in report.graph_module.graph.nodes if n.op == "call_function"]
    return report, targets, got, fn(x, w, b)


@pytest.mark.parametrize("fn", [gelu_proj, heads, residual_norm], ids=["gelu", "heads", "residual"])
def test_a_float32_addmm_read_pointwise_becomes_mm_and_its_readers_add_the_bias(fn):
    report, targets, got, want = _run(fn, torch.float32)
    assert aten.addmm.default not in targets and aten.mm.default in targets
    # no kernel of its own for the add: it joined each reader's kernel
    assert not any(k.__name__ == "fuselint_add" for k in report.kernels), [k.__name__ for k in report.kernels]
    for g, w in zip(*((got, want) if isinstance(got, tuple) else ((got,), (want,))), strict=True):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_an_addmm_read_by_a_matmul_or_in_bfloat16_stays_whole():
    _, targets, got, want = _run(scores, torch.float32)
    assert aten.addmm.default in targets
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    _, targets, got, want = _run(gelu_proj, torch.bfloat16)  # a 16-bit mm result would round once more
    assert aten.addmm.default in targets and aten.mm.default not in targets


def flat(x, w, b):  # a view the expanded bias cannot take (its rows have stride 0): stays whole
    return torch.sigmoid(F.linear(x, w, b).view(-1)) * 3


def test_a_view_the_expanded_bias_cannot_take_keeps_the_addmm_and_the_answer():
    _, targets, got, want = _run(flat, torch.float32)
    assert aten.addmm.default in targets and aten.mm.default not in targets
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
