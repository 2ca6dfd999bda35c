"""CPU timing: variants compared under the same load, each by its fastest run."""

from __future__ import annotations

import time

import pytest

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


def test_gpu_rounds_rotate_the_first_callable_and_take_each_median_round():
    from fuselint.verify.timing import gpu_rounds

    order, slow = [], {"a": {1}, "b": {1, 2}, "c": set()}  # the rounds in which the host ran slow

    def bench(fn, warmup, rep):
        name, r = fn(), len([o for o in order if o[0] == fn()])
        order.append((name, warmup))
        return 9.0 if r in slow[name] else 1.0 + 0.01 * r

    a, b, c = gpu_rounds([lambda: "a", lambda: "b", lambda: "c"], bench, "H200", rounds=6)
    firsts = [order[3 * r][0] for r in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]
    # the first round warms up; the others take a short warm-up
    assert [w for _, w in order[:3]] == [25, 25, 25] and {w for _, w in order[3:]} == {5.0}
    # slow rounds (a: 1 of 6, b: 2 of 6) do not move the median
    assert a.ms < 2 and b.ms < 2 and c.ms < 2
    assert a.runs == 6 and a.device == "H200"
    assert b.ms == pytest.approx(1.045) and b.spread == pytest.approx(1.045)


def test_the_gpu_rounds_are_pinned_to_one_cpu_and_every_cpu_comes_back(monkeypatch):
    import os

    from fuselint.verify import timing

    calls = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 5}, raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: calls.append(set(cpus)), raising=False)
    with pytest.raises(RuntimeError), timing.pinned():
        assert calls == [{5}]
        raise RuntimeError("a callable failed while timed")
    assert calls == [{5}, {0, 1, 5}]


def test_a_process_that_may_not_pin_still_times_unpinned(monkeypatch):
    # Pinning is a help to the timing, not a condition of it: a sandbox that refuses
    # sched_setaffinity (EPERM, EINVAL) must not turn every GPU row into an error row.
    import os

    from fuselint.verify import timing

    def refuse(pid, cpus):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", refuse, raising=False)
    ran = []
    with timing.pinned():
        ran.append(True)
    assert ran == [True]
