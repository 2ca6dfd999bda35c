"""SDPA's kernel under compile: the choice per mask form, the math path's price, and FL302."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fuselint.fusion.attention import Mask, SdpaCall, choose_backend, eager_call, sdpa_call
from fuselint.fusion.devices import device
from fuselint.fusion.model import analyse
from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "trace" / "tracing_mask.py"
H100 = device("H100-measured")


def _call(mask: Mask | None = None, dtype=torch.bfloat16, head_dim=64, causal=False) -> SdpaCall:
    return SdpaCall(16 * 12, 256, 256, head_dim, head_dim, dtype, (1, 1, 1), mask, causal)


def _bool(shape, stride, all_true=False) -> Mask:
    return Mask(torch.bool, shape, stride, all_true)


@pytest.mark.parametrize(
    "mask,dtype,expected",
    [
        (None, torch.bfloat16, "flash"),
        (None, torch.float32, "efficient"),
        (_bool((16, 1, 256, 256), (65536, 65536, 256, 1)), torch.bfloat16, "efficient"),
        (_bool((16, 1, 256, 256), (256, 256, 0, 1)), torch.bfloat16, "efficient"),  # padding mask
        (Mask(torch.bfloat16, (1, 12, 256, 256), (0, 65536, 256, 1)), torch.bfloat16, "efficient"),
        (_bool((16, 1, 256, 256), (0, 256, 1, 0)), torch.bfloat16, "math"),  # BERT on torch 2.11
        (Mask(torch.bfloat16, (16, 1, 256, 256), (256, 256, 1, 0)), torch.bfloat16, "math"),
        (_bool((16, 1, 256, 1), (256, 256, 1, 1)), torch.bfloat16, "efficient"),  # one key: any stride
    ],
)
def test_backend_follows_mask_form(mask, dtype, expected):
    assert choose_backend(_call(mask, dtype)).name == expected


def test_math_path_says_why_and_what_avoids_it():
    broadcast = choose_backend(_call(_bool((16, 1, 256, 256), (0, 256, 1, 0))))
    assert "boolean and broadcast over keys" in broadcast.reason and "(0, 256, 1, 0)" in broadcast.reason
    assert "is_causal=True" in broadcast.fix
    assert choose_backend(_call(_bool((16, 1, 256, 256), (0, 256, 1, 0), all_true=True))).fix.endswith(
        "pass no mask"
    )
    odd = choose_backend(_call(head_dim=20))
    assert odd.name == "math" and "head dimension is 20" in odd.reason


def test_eager_drops_only_an_all_true_mask():
    tracing_only = _call(_bool((16, 1, 256, 256), (0, 256, 1, 0), all_true=True))
    assert eager_call(tracing_only).mask is None
    assert choose_backend(eager_call(tracing_only)).name == "flash"
    real = _call(_bool((16, 1, 256, 256), (0, 256, 1, 0)))
    assert eager_call(real) == real


def _analysis(factory: str, trace: str = "cpu"):
    return analyse(capture(load_entry(f"{FIXTURE}:{factory}"), device=trace), H100)


def _sdpa(analysis):
    return [
        call
        for p in analysis.plans
        for _n, d in p.graph.dag.nodes(data=True)
        if (call := sdpa_call(d["fx"])) is not None
    ]


@pytest.mark.parametrize("trace", ["cpu", "meta"])
def test_traced_mask_is_read_before_sdpas_own_conversion(trace):
    (call,) = _sdpa(_analysis("entry", trace))
    assert call.mask == Mask(torch.bool, (2, 1, 32, 32), (0, 32, 1, 0), all_true=True)
    (causal,) = _sdpa(_analysis("entry_causal", trace))
    assert causal.mask.dtype == torch.bool and causal.mask.stride[-1] == 1 and not causal.mask.all_true


@pytest.mark.parametrize("trace", ["cpu", "meta"])
def test_fl302_flags_the_tracing_only_mask_and_prices_compile_slower(trace):
    analysis = _analysis("entry", trace)
    (finding,) = [f for f in analysis.findings if f.code == "FL302"]
    assert finding.span.path == str(FIXTURE) and "scaled_dot_product_attention" in finding.source_line
    assert "compile is slower than eager" in finding.message and "pass no mask" in finding.message
    assert finding.gain.time_us > 0
    # the math path is priced on the compiled side only: this model gets slower under compile
    attention = [
        g for gc in analysis.cost.graphs for g in gc.groups if g.fused.launches > 1 and not g.fusible
    ]
    assert attention and all(g.fused.time_us > g.eager.time_us for g in attention)


@pytest.mark.parametrize("factory", ["entry_causal", "entry_no_mask"])
def test_fl302_quiet_when_sdpa_stays_fused(factory):
    assert [f for f in _analysis(factory).findings if f.code == "FL302"] == []


def test_cost_by_class_splits_the_math_path_and_adds_up():
    from fuselint.fusion.cost import cost_by_class, math_parts

    analysis = _analysis("entry")
    classes = cost_by_class(list(analysis.plans), H100)
    for side in ("eager", "fused"):
        total = getattr(analysis.cost, side)
        assert sum(c.time_us for c in classes[side].values()) == pytest.approx(total.time_us)
        assert sum(c.launches for c in classes[side].values()) == total.launches
    # eager runs the fused kernel (no mask); compile runs the math path: its two matmuls are gemm
    (call,) = _sdpa(analysis)
    assert classes["eager"]["attention"].launches == 1 and "attention" not in classes["fused"]
    mm = [p for p in math_parts(call) if "@" in p.name]
    assert classes["fused"]["gemm"].flops - classes["eager"]["gemm"].flops == sum(p.flops for p in mm)


@pytest.mark.parametrize("trace", ["cpu", "meta"])
def test_eager_runs_none_of_the_tracing_only_mask(trace):
    # eager code makes no mask at all, so it launches what the maskless model does; a causal
    # mask (not all true) is built in eager too
    traced, plain = _analysis("entry", trace), _analysis("entry_no_mask", trace)
    assert traced.cost.eager == plain.cost.eager
    assert traced.cost.fused.launches > plain.cost.fused.launches  # compile builds it, then the math path
    causal = _analysis("entry_causal", trace)
    assert causal.cost.eager.launches > plain.cost.eager.launches


def test_fused_kernels_compute_whole_score_tiles():
    from dataclasses import replace

    from fuselint.fusion.attention import fused_work

    def flops(call, length):
        return fused_work(replace(call, q_len=length, kv_len=length))[1]

    flash, dense = _call(), _call(Mask(torch.bfloat16, (16, 12, 256, 256), (786432, 65536, 256, 1)))
    # ViT's 197 tokens: the flash kernel's 128 x 128 tiles cover 256 x 256 scores
    assert flops(flash, 197) == flops(flash, 256) == 4 * 16 * 12 * 256 * 256 * 64
    assert flops(flash, 130) == flops(flash, 256) and flops(flash, 128) < flops(flash, 130)
    # the memory-efficient kernel (a mask) tiles by 64: 130 tokens compute 192 x 192 scores
    assert flops(dense, 130) == 4 * 16 * 12 * 192 * 192 * 64
    # bytes follow the real lengths
    assert fused_work(replace(flash, q_len=197, kv_len=197))[0] < fused_work(flash)[0]


@pytest.mark.parametrize("trace", ["cpu", "meta"])
def test_a_causal_mask_built_from_positions_is_known_causal_and_kept_in_eager(trace):
    # nanoGPT-style tril masks are built in eager too: recognised as causal (the fix names
    # is_causal), but eager still pays for it
    (causal,) = _sdpa(_analysis("entry_causal", trace))
    assert causal.mask.causal and not causal.mask.all_true
    assert eager_call(causal) == causal
    (traced,) = _sdpa(_analysis("entry", trace))
    assert traced.mask.all_true and not traced.mask.causal


def test_the_fix_for_a_causal_mask_off_the_fused_kernels_names_is_causal():
    mask = Mask(torch.bool, (16, 1, 256, 256), (0, 0, 1, 0), causal=True)
    assert choose_backend(_call(mask)).fix == "it is causal: pass is_causal=True and no mask"


@pytest.mark.parametrize("trace", ["cpu", "meta"])
def test_eager_is_priced_from_the_probe_not_the_graphs_mask(trace):
    # a causal mask built only while tracing (transformers on torch 2.11): eager runs the causal
    # fused kernel and builds no mask, as a model passing is_causal does; compile pays for it
    traced, plain = _analysis("entry_tracing_causal", trace), _analysis("entry_is_causal", trace)
    (call,) = _sdpa(traced)
    assert call.mask is not None and call.mask.causal and not call.is_causal
    assert traced.cost.eager == plain.cost.eager
    assert traced.cost.fused.launches > plain.cost.fused.launches
    # the user's own causal mask is built in eager too: eager pays for it as built
    own = _analysis("entry_causal", trace)
    assert own.cost.eager.launches > plain.cost.eager.launches
    assert own.cost.eager.time_us > plain.cost.eager.time_us


def test_eager_call_takes_the_probe_only_where_it_is_unambiguous():
    from fuselint.graph.eager_probe import EagerSdpa

    causal_mask = _call(Mask(torch.bool, (16, 1, 256, 256), (0, 0, 256, 1), causal=True))
    q = (16, 12, 256, 64)
    plain = EagerSdpa(q, q, torch.bfloat16, None, True)
    masked = EagerSdpa(q, q, torch.bfloat16, ((16, 1, 256, 256), (0, 0, 256, 1), torch.bool), False)
    assert eager_call(causal_mask, (plain, plain)) == _call(causal=True)
    # eager passed the same mask: the graph's (which knows it is causal) stands
    assert eager_call(causal_mask, (masked,)) == causal_mask
    # eager calls of these sizes disagree, or none has them: the graph's call stands
    assert eager_call(causal_mask, (plain, masked)) == causal_mask
    other = EagerSdpa((16, 12, 128, 64), (16, 12, 128, 64), torch.bfloat16, None, True)
    assert eager_call(causal_mask, (other,)) == causal_mask
    assert eager_call(causal_mask, ()) == causal_mask
