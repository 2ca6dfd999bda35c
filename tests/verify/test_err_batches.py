"""bench/err_batches.py: per-batch errors of bench/models.py summarised, from made-up rows (no GPU)."""

from __future__ import annotations

import json

import pytest
from bench_loader import bench_module


@pytest.fixture(scope="module")
def errs():
    return bench_module("err_batches")


def _row(model: str, backend: str, batches: list[tuple[float, float]]) -> dict:
    """models.py's row: per batch (vs eager, max vs float32, mean vs float32, max vs float64)."""
    return {
        "model": model,
        "backend": backend,
        "train": False,
        "err_batches": [[0.0, mx, mean, mx] for mx, mean in batches],
    }


def _rows() -> list[dict]:
    return [
        _row("net", "eager", [(0.1, 0.01), (0.3, 0.01), (0.2, 0.01)]),
        _row("net", "fuselint", [(0.2, 0.03), (0.2, 0.02), (0.5, 0.01)]),
        _row("net", "inductor", [(0.3, 0.02), (0.1, 0.02), (0.4, 0.02)]),
        {"model": "net", "backend": "fuselint", "train": True, "err_batches": []},  # a training row
        {"model": "broken", "backend": "fuselint", "error": "boom"},
    ]


def test_counts_the_batches_where_fuselint_is_above(errs):
    summary = errs.summarize(_rows())
    assert list(summary) == ["net"]
    c = summary["net"]["compare"]
    # means 0.03 > 0.02, 0.02 = 0.02 (not above), 0.01 < 0.02; maxima 0.2 < 0.3, 0.2 > 0.1, 0.5 > 0.4
    assert (c["mean_above"], c["max_above"], c["batches"]) == (1, 2, 3)
    assert c["mean_ratio"] == pytest.approx(0.06 / 0.06)
    fl = summary["net"]["backends"]["fuselint"]
    assert fl["mean_of_means"] == pytest.approx(0.02)
    assert fl["mean_of_maxima"] == pytest.approx(0.3)
    assert fl["median_of_maxima"] == pytest.approx(0.2) and fl["largest_max"] == pytest.approx(0.5)
    assert "compare" in summary["net"] and summary["net"]["backends"]["eager"]["batches"] == 3


def test_a_run_of_two_dtypes_keeps_them_apart(errs):
    rows = [dict(r, dtype="bfloat16") for r in _rows()[:3]]
    rows += [dict(r, dtype="float32", err_batches=[[0.0, 1.0, 1.0, 1.0]] * 3) for r in _rows()[:3]]
    summary = errs.summarize(rows)
    assert list(summary) == ["net bfloat16", "net float32"]
    assert summary["net bfloat16"]["backends"]["fuselint"]["mean_of_means"] == pytest.approx(0.02)
    assert summary["net float32"]["backends"]["fuselint"]["mean_of_means"] == pytest.approx(1.0)
    assert list(errs.summarize([dict(r, dtype="float32") for r in _rows()])) == ["net"]


def test_batches_of_different_counts_are_refused(errs):
    rows = _rows()
    rows[2]["err_batches"].pop()
    with pytest.raises(ValueError, match="3 batches against 2"):
        errs.summarize(rows)


def test_main_writes_the_tables(errs, tmp_path, capsys):
    run = tmp_path / "err.json"
    run.write_text(json.dumps({"env": "made-up", "command": "x", "rows": _rows()}))
    md = tmp_path / "out.md"
    assert errs.main([str(run), "--md", str(md)]) == 0
    text = md.read_text()
    assert "| net | fuselint | 3 | 2.0000e-02 | 0.3 | 0.2 | 0.5 |" in text
    assert "| net | fuselint / inductor | 1 of 3 | 2 of 3 | 1.0000 |" in text
    assert text in capsys.readouterr().out


def test_bad_input_is_a_one_line_error(errs, tmp_path, capsys):
    assert errs.main([str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err.strip() == f"err_batches: no such file: {tmp_path / 'nope.json'}"
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"rows": [{"model": "m", "backend": "eager", "train": False}]}))
    assert errs.main([str(empty)]) == 2
    assert "no row with per-batch errors" in capsys.readouterr().err


def test_the_float64_mean_is_compared_where_every_batch_has_it(errs, tmp_path):
    # a float32 model's float32 reference is eager itself: only the mean against float64 says which
    # backend is nearer the exact answer (models.py's fifth per-batch number, session 25 on)
    rows = _rows()
    for row, means64 in ((rows[1], (0.5, 0.1, 0.3)), (rows[2], (0.4, 0.2, 0.2))):
        row["err_batches"] = [b + [m] for b, m in zip(row["err_batches"], means64, strict=True)]
    c = errs.summarize(rows)["net"]["compare"]
    assert c["mean64_above"] == 2 and c["mean64_ratio"] == pytest.approx(0.9 / 0.8)
    run = tmp_path / "err.json"
    run.write_text(json.dumps({"rows": rows}))
    md = tmp_path / "out.md"
    assert errs.main([str(run), "--md", str(md)]) == 0
    assert "| net | fuselint / inductor | 1 of 3 | 2 of 3 | 1.0000 | 2 of 3 | 1.1250 |" in md.read_text()
    # a run from before: four numbers a batch, no float64 columns
    assert "mean64_ratio" not in errs.summarize(_rows())["net"]["compare"]
    run.write_text(json.dumps({"rows": _rows()}))
    assert errs.main([str(run), "--md", str(md)]) == 0
    assert "float64" not in md.read_text()
