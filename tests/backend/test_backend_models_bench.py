"""bench/models.py's ratio lines: the ratio of medians, and the median of the ratios paired by
round (the one a host that drifts between rounds cannot bias). No GPU needed."""

from __future__ import annotations

import sys

from bench_loader import bench_module


def _models_module():
    return bench_module("models")


def _row(model, backend, rounds):
    return {"model": model, "dtype": "bfloat16", "train": False, "backend": backend,
            "wall_ms": sorted(rounds)[len(rounds) // 2], "wall_rounds": rounds}  # fmt: skip


def test_paired_ratios_follow_the_rounds_where_the_ratio_of_medians_does_not():
    m = _models_module()
    # the host slows down round by round; fuselint is 10% faster in rounds 3-5 and 50% slower in
    # rounds 1-2: the medians compare fuselint's round 2 with Inductor's round 3
    ind = [1.0, 2.0, 3.0, 4.0, 5.0]
    fuse = [1.5, 3.0, 2.7, 3.6, 4.5]
    rows = [_row("gpt2", "fuselint", fuse), _row("gpt2", "inductor", ind), _row("gpt2", "eager", [6.0] * 5)]
    lines = m.ratio_lines(rows)
    assert lines[0] == "- fuselint / inductor wall: gpt2 1.00; geomean 1.00"
    assert lines[1] == "  - the same, median of the ratios within each round: gpt2 0.90; geomean 0.90"
    assert lines[2] == "- fuselint / eager wall: gpt2 0.50; geomean 0.50"
    # rows without rounds (older JSON) give the ratio of medians only
    for r in rows:
        r.pop("wall_rounds")
    assert [line[:3] for line in m.ratio_lines(rows)] == ["- f", "- f"]


def _errors(model, backend, dtype, means):
    # err_batches: (vs eager, vs float32, mean vs float32, vs float64, mean vs float64) per batch
    batches = [(9.0, 9.0, m, 9.0, m / 2) for m in means]
    return {"model": model, "dtype": dtype, "train": False, "backend": backend, "err_batches": batches}


def test_the_mean_error_line_compares_each_dtype_against_its_exact_answer():
    m = _models_module()
    rows = [
        _errors("gpt2", "fuselint", "bfloat16", [1.0, 3.0]),
        _errors("gpt2", "inductor", "bfloat16", [2.0, 2.0]),  # means equal; fuselint's larger on one
        _errors("vit", "fuselint", "bfloat16", [1.0, 1.0]),
        _errors("vit", "inductor", "bfloat16", [2.0, 2.0]),
        _errors("bert", "fuselint", "float32", [0.0, 0.0, 1.0]),  # float32: against float64's column
        _errors("bert", "inductor", "float32", [4.0, 0.0, 0.0]),
        _errors("t5enc", "fuselint", "bfloat16", [1.0]),  # no Inductor row: left out
        {"model": "llama", "backend": "inductor", "error": "compile failed"},
    ]
    lines = m.error_lines(rows)
    assert lines == [
        "- fuselint / inductor mean error against float32, bfloat16 (in brackets: batches where fuselint's is "
        "the larger): gpt2 1.0000 (1/2), vit 0.5000 (0/2)",
        "- fuselint / inductor mean error against float64, float32 (in brackets: batches where fuselint's is "
        "the larger): bert 0.2500 (1/3)",
    ]
    assert m.error_lines([r for r in rows if r.get("dtype") != "float32"])[0].endswith("vit 0.5000 (0/2)")


def test_bn_random_draws_every_batchnorm_of_a_timm_model_from_its_seed(monkeypatch):
    # timm is not a test dependency: a stand-in `create_model` returns a small CNN with two BatchNorms
    import types

    import torch

    m = _models_module()

    def create_model(arch, pretrained=False, **kw):
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3),
            torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.Conv2d(4, 4, 1),
            torch.nn.BatchNorm2d(4),
        )

    monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(create_model=create_model))
    name = next(iter(m.TIMM))
    plain, _ = m.build(name, small=True)
    monkeypatch.setattr(m, "BN_SEED", 3)
    drawn, _ = m.build(name, small=True)
    again, _ = m.build(name, small=True)
    norms = [
        (a, b, c) for a, b, c in zip(plain, drawn, again, strict=True) if isinstance(a, torch.nn.BatchNorm2d)
    ]
    assert len(norms) == 2
    for a, b, c in norms:
        assert torch.equal(a.running_var, torch.ones(4)) and not torch.equal(b.running_var, a.running_var)
        assert torch.equal(b.running_var, c.running_var) and torch.equal(b.weight, c.weight)  # seeded
    assert torch.equal(plain[0].weight, drawn[0].weight)  # convolutions untouched
