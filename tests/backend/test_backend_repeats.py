"""A tensor concatenated with itself (``cat((freqs, freqs), -1)``, LLaMA's rotary table) reaches
the backend decomposed as expand + clone + view; fuselint.backend.repeats writes it back as the
cat, so the rope kernels recompute cos and sin of it instead of reading them from two kernels
of their own (the lowering cannot index ``m % n``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from backend_helpers import needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.repeats import repeats_as_cats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fusion"))
from fusion_capture import aten_forwards  # noqa: E402

B, H, S, D = 2, 4, 8, 16


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    return torch.cat((-x[..., D // 2 :], x[..., : D // 2]), dim=-1)


def rope(q: torch.Tensor, k: torch.Tensor, freqs: torch.Tensor):
    """LLaMA's apply_rotary_pos_emb after its rotary table: freqs (1, S, D/2)."""
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _args():
    torch.manual_seed(0)
    return torch.randn(B, H, S, D), torch.randn(B, H, S, D), torch.randn(1, S, D // 2)


def test_the_decomposed_self_cat_is_rewritten_to_the_cat_it_was():
    def table(freqs):
        emb = torch.cat((freqs, freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    ((gm, args),) = aten_forwards(table, torch.randn(1, S, 4))
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.expand.default in targets, "the decomposition this pass undoes"
    want = gm(*args)
    assert repeats_as_cats(gm) == 1
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.cat.default in targets and torch.ops.aten.expand.default not in targets
    for got, w in zip(gm(*args), want, strict=True):
        torch.testing.assert_close(got, w, atol=0, rtol=0)


def test_an_expand_of_a_dim_that_is_not_merged_is_left_alone():
    def broadcast(x):
        return x.unsqueeze(2).expand(1, S, 2, 4).clone() * 2  # no merging view: not a cat

    ((gm, _args_),) = aten_forwards(broadcast, torch.randn(1, S, 4))
    assert repeats_as_cats(gm) == 0


@needs_interpreter
def test_rope_kernels_recompute_cos_and_sin_of_the_table():
    torch._dynamo.reset()
    mark = history_mark()
    q, k, freqs = _args()
    got = torch.compile(rope, backend=fuselint_backend)(q, k, freqs)
    for g, w in zip(got, rope(q, k, freqs), strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
    (report,) = reports_since(mark)
    assert len(report.kernels) == 1, [k.__name__ for k in report.kernels]
    (kernel,) = report.kernels
    assert kernel.ir.inputs.count("arg2_1") >= 1 and {"cos", "sin"} <= set(kernel.ir.op_names)


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
