"""bench/backend.py runs end to end at smoke size on CPU and writes its JSON and markdown."""

from __future__ import annotations

import json

from backend_helpers import needs_interpreter
from bench_loader import bench_module

pytestmark = needs_interpreter


def _bench_module():
    return bench_module("backend")


def test_smoke_run_writes_json_and_markdown(tmp_path):
    bench = _bench_module()
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    argv = ["--smoke", "--no-cold", "--patterns", "cos_sin,torch_softmax,conv_relu_maxpool"]
    assert bench.main(argv + ["--json", str(out_json), "--md", str(out_md)]) == 0
    result = json.loads(out_json.read_text())
    rows = {(r["pattern"], r["dtype"], r["backend"]): r for r in result["results"]}
    assert len(rows) == 6 * 2  # 2 dtypes of 3 patterns, eager and fuselint
    for (pattern, _, backend), row in rows.items():
        assert "error" not in row, row
        assert row["ms"] > 0 and row["gbps"] > 0
        if backend == "fuselint":
            assert row["kernels"] >= 1 and row["max_abs_err"] < 0.05
    assert set(result["launch_overhead_us"]) == {"eager", "fuselint"}
    table = out_md.read_text()
    assert "| torch_softmax | bfloat16 |" in table and "Launch overhead" in table


def test_a_failing_pattern_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    bench = _bench_module()

    def broken(x):
        raise RuntimeError("pattern exploded")

    monkeypatch.setitem(bench.MATRIX_PATTERNS, "cos_sin", (broken, "x"))
    out_json = tmp_path / "b.json"
    argv = ["--smoke", "--no-cold", "--patterns", "cos_sin,silu_mul", "--backends", "eager"]
    assert bench.main(argv + ["--json", str(out_json)]) == 0
    rows = json.loads(out_json.read_text())["results"]
    assert {r["pattern"] for r in rows if "error" in r} == {"cos_sin"}
    assert all("ms" in r for r in rows if r["pattern"] == "silu_mul")
