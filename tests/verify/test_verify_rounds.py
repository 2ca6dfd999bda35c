"""verify compiles every backend first and times all its rows in the same rounds: each
backend's compiled code must still serve its own calls while the others' are timed."""

from __future__ import annotations

import torch
from torch._dynamo import list_backends, register_backend

from fuselint.graph.entry import Built
from fuselint.verify.run import _run_backends

CALLS = {"fl_test_a": [0, 0], "fl_test_b": [0, 0]}  # backend: [graphs compiled, compiled calls]


def _counting(name: str):
    def backend(gm: torch.fx.GraphModule, _inputs):
        CALLS[name][0] += 1

        def run(*args):
            CALLS[name][1] += 1
            return gm.forward(*args)

        return run

    return backend


for _name in CALLS:
    if _name not in list_backends(exclude_tags=()):
        register_backend(_counting(_name), name=_name)


def test_every_backend_keeps_its_own_code_while_all_are_timed_in_rounds():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).eval()
    x = torch.randn(4, 8)
    variants = [("original", Built(model, (x,))), ("fixed", Built(model, (x,)))]
    with torch.no_grad():
        reference = model(x)
    for counts in CALLS.values():
        counts[:] = [0, 0]
    rows = _run_backends(variants, ("eager", "fl_test_a", "fl_test_b"), "cpu", reference)
    assert [(r.variant, r.backend) for r in rows] == [
        (v, b) for v in ("original", "fixed") for b in ("eager", "fl_test_a", "fl_test_b")
    ]
    assert all(r.ms is not None and r.ms > 0 and not r.error and r.check.ok for r in rows), rows
    # One graph each: both variants are the same module, so the second variant's first call
    # hits the backend's cache; none recompiled while the other backend's calls were timed.
    assert CALLS["fl_test_a"][0] == 1 and CALLS["fl_test_b"][0] == 1
    # Each backend ran its compiled code on every timed call of its rows (20 rounds at least).
    assert CALLS["fl_test_a"][1] > 40 and CALLS["fl_test_b"][1] > 40


def _ready(variant: str, backend: str, call) -> object:
    from fuselint.verify.numerics import Comparison
    from fuselint.verify.run import _Ready

    return _Ready(variant, backend, call, "", None, Comparison(True, 0.0, 1))


def _fails_after(calls: int):
    count = [0]

    def call():
        count[0] += 1
        if count[0] > calls:
            raise RuntimeError("illegal instruction in the compiled code")

    return call


def test_a_callable_failing_while_timed_gets_its_own_error_and_the_others_their_timings():
    # The original variant's compiled code fails after its check run and warm-up; the fixed
    # variant under the same backend runs: its row shows its timing, not the original's error.
    from fuselint.verify.run import _timings

    ready = [
        _ready("original", "eager", lambda: None),
        _ready("fixed", "eager", lambda: None),
        _ready("original", "fl_test_a", _fails_after(5)),
        _ready("fixed", "fl_test_a", lambda: None),
    ]
    timings = _timings(ready, "cpu")
    assert len(timings) == 4
    assert isinstance(timings[2], RuntimeError)
    assert [isinstance(t, Exception) for t in timings] == [False, False, True, False], timings


def test_a_backend_named_twice_still_gets_one_timing_per_row_when_one_fails():
    # --backend fl_test_a,fl_test_a: the fallback must not time a backend's rows once per mention.
    from fuselint.verify.run import _timings

    ready = [
        _ready("original", "eager", lambda: None),
        _ready("original", "fl_test_a", _fails_after(5)),
        _ready("original", "fl_test_a", lambda: None),
    ]
    timings = _timings(ready, "cpu")
    assert [isinstance(t, Exception) for t in timings] == [False, True, False], timings
