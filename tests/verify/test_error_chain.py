"""bench/error_chain.py's pure parts: unit names, mixed-backend plans and the summary tables (no GPU)."""

from __future__ import annotations

import pytest
from bench_loader import bench_module


@pytest.fixture(scope="module")
def chain():
    return bench_module("error_chain")


def test_unit_names(chain):
    assert chain.unit_names([1, 2]) == ["stem", "b0.0", "b1.0", "b1.1", "head"]


def test_mix_one_unit_and_prefix(chain):
    assert chain.mix("i", "f", 4, at=2) == ["i", "i", "f", "i"]
    assert chain.mix("i", "f", 4, before=2) == ["f", "f", "i", "i"]
    assert chain.mix("i", "f", 3, before=0) == ["i", "i", "i"]
    with pytest.raises(ValueError):
        chain.mix("i", "f", 3)
    with pytest.raises(ValueError):
        chain.mix("i", "f", 3, at=1, before=1)


def _batch(ind, fl, swap, prefix):
    return {
        "chain": {"inductor": ind, "fuselint": fl},
        "local": {"inductor": ind, "fuselint": fl},
        "ref_scale": [1.0] * len(ind),
        "swap": swap,
        "prefix": prefix,
    }


def test_summary_counts_batches_where_fuselint_is_above(chain):
    data = {
        "units": ["stem", "head"],
        "backends": ["inductor", "fuselint"],
        # unit 0: fuselint above on one batch of two; the head: on both
        "batches": [
            _batch([1e-4, 3e-4], [2e-4, 4e-4], swap=[3e-4, 5e-4], prefix=[3e-4, 3e-4]),
            _batch([2e-4, 3e-4], [1e-4, 5e-4], swap=[2e-4, 3e-4], prefix=[3e-4, 2e-4]),
        ],
    }
    text = chain.summarize(data)
    rows = {}
    for line in text.splitlines():  # the first table's rows (the swap table repeats the unit names)
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line)
    assert "| 1/2 |" in rows["stem"]
    assert "| 2/2 |" in rows["head"]
    # the chain means: stem inductor 1.5, fuselint 1.5 (x1e-4); head 3.0 and 4.5
    assert "| 3.000 | 4.500 |" in rows["head"]
    # swaps against the inductor chain's final error 3.0: stem's swap 2.5 (-0.5, above on 0 of 2),
    # head's 4.0 (+1.0, above on 1 of 2); prefix before the head 2.5 (below on 1, equal on 1)
    swap_rows = [
        line for line in text.splitlines() if line.startswith("| stem |") or line.startswith("| head |")
    ]
    assert "| 2.500 | -0.500 | 0/2 |" in swap_rows[-2]
    assert "| 4.000 | +1.000 | 1/2 | 2.500 | -0.500 | 0/2 |" in swap_rows[-1]


def test_randomize_batchnorm_is_seeded_and_leaves_other_layers(chain):
    import torch

    def net():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4))

    a, b, c = net(), net(), net()
    conv = a[0].weight.clone()
    assert chain.randomize_batchnorm(a, 7) == 2
    chain.randomize_batchnorm(b, 7)
    chain.randomize_batchnorm(c, 8)
    assert torch.equal(a[0].weight, conv)
    assert torch.equal(a[1].running_var, b[1].running_var) and torch.equal(a[2].bias, b[2].bias)
    assert not torch.equal(a[1].running_var, c[1].running_var)
    assert not torch.equal(a[1].running_mean, a[2].running_mean)
    assert bool((a[1].running_var >= 0.5).all()) and bool((a[1].running_var <= 2.0).all())
    assert not torch.allclose(a[1].weight, torch.ones(4))
