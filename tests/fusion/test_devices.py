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
