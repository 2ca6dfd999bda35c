"""Device tables: the built-in ones, the ones measured by bench/calibrate.py, and a user's file."""

from __future__ import annotations

import json

import pytest

from fuselint.fusion.devices import H200, device, device_from_file, device_to_json


def test_measured_tables_ship_with_the_package():
    for name, bandwidth in (("H100-measured", 3003.7), ("h200-measured", 4251.7)):
        d = device(name)
        assert d.bandwidth_gbs == bandwidth and "bench/calibrate.py" in d.source
        assert d.half_tflops > d.fp32_tflops > 0 and d.launch_us > 0


def test_a_table_written_by_calibrate_is_read_back(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(device_to_json(H200))
    assert device(str(path)) == H200


@pytest.mark.parametrize(
    "text,problem",
    [
        ("{not json", "cannot read"),
        (json.dumps({"name": "X"}), "exactly the keys"),
        (json.dumps({**json.loads(device_to_json(H200)), "launch_us": -1}), "non-negative"),
    ],
)
def test_a_bad_table_is_named(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(KeyError, match=problem):
        device_from_file(path)


def test_an_unknown_name_lists_what_is_known():
    with pytest.raises(KeyError, match="H200-measured"):
        device("Z9000")


def test_calibrate_curves_time_the_suites_shapes(monkeypatch):
    # bench/calibrate.py --curves on a CPU with a stand-in timer (the GPU run uses do_bench):
    # every suite matmul shape and elementwise size is timed, with the rates worked out
    import importlib.util
    from pathlib import Path

    import torch

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("fuselint_bench_calibrate", root / "bench" / "calibrate.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    monkeypatch.setattr(cal, "SUITE_MATMULS", ((64, 32, 16), (128, 64, 32)))
    monkeypatch.setattr(cal, "ELEMENTWISE_MB", (1, 2))
    calls = []

    def timer(fn):
        calls.append(fn())
        return 0.5  # ms

    out = cal.curves("cpu", torch.float32, timer)
    assert [r[:3] for r in out["matmul"]] == [[64, 32, 16], [128, 64, 32]]
    assert out["matmul"][1][3] == 500.0 and out["matmul"][1][4] == round(2 * 128 * 64 * 32 / 500 / 1e6, 1)
    assert calls[1].shape == (128, 64)  # the timed function is the matmul itself
    assert [r[0] for r in out["elementwise"]] == [1.05, 2.1]  # MB read + written
    assert out["elementwise"][0][2] == round(1.05e6 / 500 / 1e3, 1)
