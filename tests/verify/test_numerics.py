"""Numerics comparison: what passes, what never passes."""

import torch

from fuselint.verify.numerics import compare


def test_equal_nested_outputs_pass():
    a = {"logits": torch.randn(3, 4), "extra": (torch.arange(3), 2)}
    assert compare(a, {"logits": a["logits"].clone(), "extra": (torch.arange(3), 2)}).ok


def test_rounding_noise_passes_and_real_error_fails():
    ref = torch.randn(64, 64)
    assert compare(ref + 1e-7 * torch.randn(64, 64), ref).ok
    bad = ref.clone()
    bad[0, 0] += 10
    result = compare(bad, ref)
    assert not result.ok and "relative error" in result.problem


def test_nan_and_shape_mismatch_never_pass():
    ref = torch.randn(4)
    assert not compare(torch.full((4,), float("nan")), ref).ok
    assert not compare(torch.randn(5), ref).ok
    assert not compare((ref,), [ref, ref]).ok


def test_bf16_has_looser_tolerance():
    ref = torch.randn(256, dtype=torch.float32)
    # bf16 storage rounding (~4e-3) passes for bf16 outputs but fails an fp32 comparison.
    assert compare((ref * 1.003).bfloat16(), ref.bfloat16()).ok
    assert not compare(ref.bfloat16().float(), ref).ok


def test_integer_outputs_must_match_exactly():
    assert not compare(torch.tensor([1, 2]), torch.tensor([1, 3])).ok
