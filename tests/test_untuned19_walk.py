"""bench/untuned19_select.py's walk: fixes17's rows past its cut are reused, the first LIMIT that break
enter, and no trace starts past the time cut."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from bench_loader import bench_module

ROOT = Path(__file__).resolve().parents[1]


def _select():
    return bench_module("untuned19_select")


def _clock(hour, minute):
    return lambda: datetime.datetime(2026, 11, 27, hour, minute, tzinfo=datetime.timezone.utc)


def test_walk_starts_at_the_cut_reuses_kept_rows_and_stops_at_limit():
    select = _select()
    order = [f"f{i}" for i in range(select.CUT + 30)]
    kept = {order[select.CUT]: {"family": order[select.CUT], "sites": [], "enters": True}}
    traced = []

    def trace(family):
        traced.append(family)
        return {"family": family, "sites": ["x.py:1 gb0124"] if int(family[1:]) % 2 else []}

    rows = list(select.walk(order, kept, trace, _clock(13, 0)))
    assert rows[0] == {"family": order[select.CUT], "sites": [], "kept": True, "at": select.CUT}
    assert order[select.CUT] not in traced and traced[0] == order[select.CUT + 1]
    assert sum(1 for r in rows if r.get("enters")) == select.LIMIT
    assert rows[-1]["stopped"] == f"{select.LIMIT} entered"
    assert len(traced) == 2 * select.LIMIT - 1  # odd positions break: f261 .. f279, 19 traces


def test_walk_starts_no_trace_past_the_time_cut_but_reuses_nothing_after_it():
    select = _select()
    order = [f"f{i}" for i in range(select.CUT + 3)]
    rows = list(select.walk(order, {}, lambda f: {"family": f, "sites": []}, _clock(13, 40), "13:40"))
    assert rows == [{"stopped": "time cut 13:40 UTC", "at": select.CUT}]
    rows = list(select.walk(order, {}, lambda f: {"family": f, "sites": []}, _clock(13, 39), "13:40"))
    assert [r.get("at") for r in rows] == [select.CUT, select.CUT + 1, select.CUT + 2, len(order)]
    assert rows[-1]["stopped"] == "end of the walk"


def test_kept_rows_are_fixes17s_54_rows_past_its_cut_none_breaking():
    select = _select()
    kept = select.kept_rows(select.PAST_CUT)
    assert len(kept) == 54
    assert not any(row.get("sites") for row in kept.values())


def test_own_file_is_the_called_objects_class_file_closure_first():
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import real_corpus

    roots = (str(Path(torch.nn.__file__).resolve().parent) + "/",)
    called = torch.nn.ReLU()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.held = torch.nn.Linear(2, 2)

        def forward(self, x):
            return called(x)

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.held = torch.nn.Linear(2, 2)

    assert real_corpus.own_file(Wrapper(), roots).endswith("modules/activation.py")
    assert real_corpus.own_file(Plain(), roots).endswith("modules/linear.py")
    assert real_corpus.own_file(Plain(), ("/nowhere/",)) is None
