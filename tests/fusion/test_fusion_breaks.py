"""A graph break is priced by the fusion it prevents: the two graphs planned apart and merged."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuselint.fusion.breaks import break_gains, merged
from fuselint.fusion.devices import H200
from fuselint.fusion.plan import plan
from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry

TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "trace"


def _captured(name: str, train: bool = False):
    cap = capture(load_entry(f"{TRACE / name}:entry"), train=train)
    return cap, [plan(g) for g in cap.graphs]


def test_merging_across_an_item_break_fuses_the_two_sides():
    # h = proj(x); peak = h.abs().max().item(); relu(h / peak) + x: apart, the epilogue after the
    # break is a kernel of its own; merged, it shares one kernel with the max over h.
    cap, plans = _captured("item_branch.py")
    (brk,) = cap.breaks
    both = merged(plans[0].graph, plans[1].graph, list(cap.links))
    assert plan(both).launches < sum(p.launches for p in plans)
    (gain,) = break_gains(cap, plans, H200)
    assert gain.launches == 1 and gain.bytes > 0 and gain.time_us > 0 and gain.device == H200.name


def test_a_break_between_ops_that_cannot_fuse_saves_nothing():
    # the print sits between GELU and a matmul: merged, they still take the same kernels
    cap, plans = _captured("print_in_forward.py")
    (gain,) = break_gains(cap, plans, H200)
    assert gain.launches == 0 and gain.bytes == 0


def test_a_break_inside_a_loop_saves_once_per_iteration():
    cap, plans = _captured("loop_break.py")
    (gain,) = break_gains(cap, plans, H200)
    calls = min(p.graph.calls for p in plans)
    assert calls > 1 and gain.launches == calls


@pytest.mark.parametrize("name", ["item_branch.py"])
def test_training_captures_are_not_priced(name):
    cap, plans = _captured(name, train=True)
    assert cap.breaks and break_gains(cap, plans, H200) == tuple(None for _ in cap.breaks)
