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
