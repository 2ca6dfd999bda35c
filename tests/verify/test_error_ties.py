"""bench/error_ties.py: a tie of c + s broken by BatchNorm's scale k < 1 (fused) vs ties to even (eager)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ties():
    spec = importlib.util.spec_from_file_location(
        "fuselint_bench_error_ties", ROOT / "bench" / "error_ties.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_tie_goes_to_even_in_eager_and_towards_smaller_c_when_fused(ties):
    k = (1 + 1e-5) ** -0.5
    # c = 1 + 2^-7 (odd last bit), s = 2^-8: c + s = 1 + 3 * 2^-8, halfway between 1 + 2^-7 and 1 + 2^-6
    c = torch.tensor([1 + 2**-7, -(1 + 2**-7)], dtype=torch.bfloat16)
    s = torch.tensor([2**-8, -(2**-8)], dtype=torch.bfloat16)
    r = ties.tie_stats(c, s, k)
    assert r["ties"] == 1.0
    # eager rounds up to the even 1 + 2^-6 (error +2^-8 times sign(c)); fused rounds towards |c| smaller
    assert r["eager"][1] == pytest.approx(2**-8, abs=2e-5)
    assert r["fused"][1] == pytest.approx(-(2**-8), abs=2e-5)
    assert r["eager"][0] == pytest.approx(r["fused"][0], abs=2e-5)


def test_no_tie_when_the_sum_is_a_bf16(ties):
    c = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    s = torch.tensor([1.0, 0.5], dtype=torch.bfloat16)
    assert ties.tie_stats(c, s, 1.0)["ties"] == 0.0
