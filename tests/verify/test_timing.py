"""CPU timing: variants compared under the same load, each by its fastest run."""

from __future__ import annotations

import time

from fuselint.verify.timing import measure_together


class BusyMachine:
    """Work that costs nothing, on a machine busy for its first `busy` calls (each then takes
    20 ms more), as when another process holds the core torch's second thread waits for."""

    def __init__(self, busy: int):
        self.busy, self.calls = busy, []

    def work(self, name: str):
        self.calls.append(name)
        if len(self.calls) <= self.busy:
            time.sleep(0.02)


def test_identical_work_times_the_same_through_a_busy_burst():
    # 6 warm-up calls, then 20 rounds of two: the first 24 timed calls are slow, so more than half
    # of each callable's 20 runs are, and the median (the spread) shows the burst.
    machine = BusyMachine(busy=30)
    a, b = measure_together([lambda: machine.work("a"), lambda: machine.work("b")], "cpu", rep_ms=0)
    # Timed one after the other, "a" would have run only while the machine was busy.
    assert a.ms < 10 and b.ms < 10
    assert a.runs == b.runs == 20
    assert a.spread > 2 or b.spread > 2, "the burst shows in the spread"


def test_rounds_interleave_and_alternate_who_goes_first():
    machine = BusyMachine(busy=0)
    measure_together([lambda: machine.work("a"), lambda: machine.work("b")], "cpu", rep_ms=0, min_rounds=4)
    timed = machine.calls[6:]  # after three warm-up calls each
    assert timed == ["a", "b", "b", "a", "a", "b", "b", "a"]
