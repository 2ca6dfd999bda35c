"""Small GEMMs of one input over parameter weights run as one GEMM over the joined weights
(fuselint/backend/gemm_groups.py); on CPU through Triton's interpreter."""

from __future__ import annotations

import gc

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from backend_helpers import needs_interpreter
from torch.multiprocessing.reductions import StorageWeakRef

from fuselint.backend import fuselint_backend, gemm_groups, history_mark, reports_since

pytestmark = needs_interpreter

aten = torch.ops.aten


class Attention(nn.Module):
    """Three projections of the same hidden states, split into heads, as Hugging Face writes them."""

    def __init__(self, width=32, heads=4, bias=True):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width, bias=bias)
        self.k = nn.Linear(width, width, bias=bias)
        self.v = nn.Linear(width, width // 2, bias=bias)  # widths may differ (grouped-query attention)
        self.o = nn.Linear(width // 2, width, bias=bias)

    def forward(self, h):
        b, s, _ = h.shape
        q = self.q(h).view(b, s, self.heads, -1).transpose(1, 2)
        k = self.k(h).view(b, s, self.heads, -1).transpose(1, 2)
        v = self.v(h).view(b, s, self.heads, -1).transpose(1, 2)
        scores = torch.softmax(q @ k.transpose(-1, -2) / 3.0, -1)
        return h + self.o((scores @ v).transpose(1, 2).reshape(b, s, -1))


def _run(model, *args, train=False):
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend=fuselint_backend)
    if train:
        out = compiled(*args)
    else:
        with torch.no_grad():
            out = compiled(*args)
    return compiled, out, reports_since(mark)


def _mms(report) -> list:
    return [
        n
        for n in report.graph_module.graph.nodes
        if n.op == "call_function" and n.target in (aten.mm.default, aten.addmm.default)
    ]


BF16 = torch.bfloat16


@pytest.mark.parametrize("bias", [True, False], ids=["addmm", "mm"])
def test_three_projections_of_one_input_run_as_one_gemm(bias):
    torch.manual_seed(0)
    model = Attention(bias=bias).eval().to(BF16)
    h = torch.randn(2, 8, 32, dtype=BF16)
    with torch.no_grad():
        expected = model(h)
    _, got, reports = _run(model, h)
    assert [r.joined for r in reports] == [2]
    (report,) = reports
    assert len(_mms(report)) == 2  # q, k and v as one; the output projection
    nodes = list(report.graph_module.graph.nodes)
    joined = [n for n in nodes if isinstance(n.target, gemm_groups.JoinedWeights)]
    assert len(joined) == (2 if bias else 1)  # the weights, and the biases
    transposes = [
        n
        for n in nodes
        if n.target in (aten.permute.default, aten.t.default) and n.args[0].op == "placeholder"
    ]
    assert len(transposes) == 1  # the output projection's: q's, k's and v's are dead, and gone
    torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)


def test_float32_gemms_stay_apart():
    # no tensor cores without TF32: the separate GEMMs already fill the GPU (bench/gemm_join.py)
    torch.manual_seed(0)
    _, _, reports = _run(Attention().eval(), torch.randn(2, 8, 32))
    assert [r.joined for r in reports] == [0]


def test_weights_changed_after_compiling_are_joined_again():
    torch.manual_seed(0)
    model = Attention().eval().to(BF16)
    h = torch.randn(2, 8, 32, dtype=BF16)
    compiled, _, reports = _run(model, h)
    (kept,) = [k for k in gemm_groups.joined_weights(reports[0].graph_module) if k.tensor.dim() == 2]
    with torch.no_grad():
        model.k.weight.mul_(2.0)  # in place: the version changes, the storage does not
        torch.testing.assert_close(compiled(h), model(h), rtol=2e-2, atol=2e-2)
        model.load_state_dict({name: torch.randn_like(p) / 8 for name, p in model.state_dict().items()})
        torch.testing.assert_close(compiled(h), model(h), rtol=2e-2, atol=2e-2)
        remade = kept.remade
        compiled(h)
    assert kept.remade == remade  # unchanged weights: the joined copy is reused


def test_large_gemms_and_results_the_caller_receives_are_left_alone(monkeypatch):
    class Returned(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(16, 16, dtype=BF16)
            self.b = nn.Linear(16, 16, dtype=BF16)

        def forward(self, x):
            return self.a(x), F.relu(self.b(x))

    torch.manual_seed(0)
    x = torch.randn(32, 16, dtype=BF16)
    _, _, reports = _run(Returned().eval(), x)
    assert [r.joined for r in reports] == [0]  # `a`'s result leaves the graph as it is
    # q's and k's results (16 x 32) over the limit: v's (16 x 16) has nothing to join
    monkeypatch.setattr(gemm_groups, "MAX_JOINED_RESULT", 16 * 32 - 1)
    _, _, reports = _run(Attention().eval().to(BF16), torch.randn(2, 8, 32, dtype=BF16))
    assert [r.joined for r in reports] == [0]


def test_training_graphs_keep_their_gemms():
    torch.manual_seed(0)
    model = Attention().to(BF16)
    h = torch.randn(2, 8, 32, dtype=BF16, requires_grad=True)
    _, out, reports = _run(model, h, train=True)
    out.sum().backward()
    assert reports and all(r.joined == 0 for r in reports)


def test_weights_the_graph_writes_stay_apart():
    class Decaying(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("wa", torch.randn(16, 16, dtype=BF16) / 4)
            self.register_buffer("wb", torch.randn(16, 16, dtype=BF16) / 4)

        def forward(self, x):
            out = x @ self.wa.t() + x @ self.wb.t()
            self.wa.mul_(0.5)  # a buffer the call itself updates: joined, it would be remade every call
            return out

    torch.manual_seed(0)
    model = Decaying()
    x = torch.randn(8, 16, dtype=BF16)
    _, _, reports = _run(model, x)
    assert [r.joined for r in reports] == [0]


def test_weights_made_under_inference_mode_are_joined_per_call():
    torch.manual_seed(0)
    h = torch.randn(2, 8, 32, dtype=BF16)
    with torch.inference_mode():
        model = Attention().eval().to(BF16)  # inference tensors: no version counter
        compiled, got, reports = _run(model, h)
        torch.testing.assert_close(got, model(h), rtol=2e-2, atol=2e-2)
        model.k.weight.mul_(2.0)
        torch.testing.assert_close(compiled(h), model(h), rtol=2e-2, atol=2e-2)
    assert [r.joined for r in reports] == [2]


def test_a_first_call_under_inference_mode_keeps_an_ordinary_joined_tensor():
    torch.manual_seed(0)
    model = Attention().eval().to(BF16)
    h = torch.randn(2, 8, 32, dtype=BF16)
    torch._dynamo.reset()
    mark = history_mark()
    compiled = torch.compile(model, backend=fuselint_backend)
    with torch.inference_mode():
        compiled(h)
    kept = [k for r in reports_since(mark) for k in gemm_groups.joined_weights(r.graph_module)]
    assert kept and not any(k.tensor.is_inference() for k in kept)
    with torch.no_grad():
        model.q.weight.mul_(-1.0)
        torch.testing.assert_close(compiled(h), model(h), rtol=2e-2, atol=2e-2)


def test_weights_replaced_by_new_tensors_are_never_taken_for_the_ones_joined():
    # as for kept layout copies: new tensors of version 0 at a freed weight's address
    torch.manual_seed(0)
    a, b = nn.Linear(384, 384, dtype=BF16), nn.Linear(384, 384, dtype=BF16)

    def new_weights():
        return {"weight": torch.randn(384, 384, dtype=BF16), "bias": torch.randn(384, dtype=BF16)}

    join = gemm_groups.JoinedWeights((0, 1))
    with torch.no_grad():
        for _ in range(20):
            assert torch.equal(join(a.weight, b.weight), torch.cat([a.weight, b.weight]))
            a.load_state_dict(new_weights(), assign=True)
            a.load_state_dict(new_weights(), assign=True)


def test_joined_weights_do_not_hold_weights_replaced_since():
    """A graph never called again after its weights were replaced (the model moved to another
    device or dtype) must not keep their memory."""
    a, b = torch.randn(8, 4), torch.randn(8, 4)
    join = gemm_groups.JoinedWeights((0, 1))
    with torch.no_grad():
        assert torch.equal(join(a, b), torch.cat([a, b]))
    old = StorageWeakRef(a.untyped_storage())
    del a
    gc.collect()
    assert old.expired()
