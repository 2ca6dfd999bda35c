"""bench/tf32_errors.py: the per-batch comparison against Inductor (no GPU)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "fuselint_bench_tf32_errors", ROOT / "bench" / "tf32_errors.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_above_counts_batches_where_a_backend_is_above_inductor():
    tf32 = _module()
    means = {"eager": [1.0, 2.0, 3.0], "fuselint": [0.5, 2.5, 3.0], "inductor": [0.9, 2.0, 3.5]}
    assert tf32.above_counts(means) == {"eager": 1, "fuselint": 1}
    assert tf32.above_counts({"eager": [1.0]}) == {}
